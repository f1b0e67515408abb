"""Compiling harnesses: the content-addressed cache, the ninja build that fills it, nvcc's passes
side by side, host tools."""
