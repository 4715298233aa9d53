"""The embedded AWS stand-in: moto, with the gaps the lab needs closed (see patches)."""
