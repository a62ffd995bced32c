"""Models of this app."""
