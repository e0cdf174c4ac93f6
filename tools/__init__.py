"""Developer tools run by the Makefile (not shipped in the wheel)."""
