"""Numerics of a case: its exact inputs, the reference D, what a correct kernel may differ by,
and how a problem's inputs reach the harness (files, or device memory on a GPU host)."""
