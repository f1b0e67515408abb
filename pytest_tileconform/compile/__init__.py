"""Compiling harnesses: the content-addressed cache, nvcc's passes side by side, host tools."""
