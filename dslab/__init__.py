"""DataSourceLab operator side: the domain core (``dslab.core``), AWS adapters, the CLI and the local lab."""

__version__ = "0.1.0"
