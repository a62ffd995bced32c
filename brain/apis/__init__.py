"""The brain's agent API (DRF views): the memory endpoint and thought lookups."""
