"""The embedded local lab and the local container runner."""
