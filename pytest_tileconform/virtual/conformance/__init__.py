"""Differential conformance of the virtual runtime against the real CUDA driver: a probe program
(``probe.cu``), the corpus it recorded on hardware, and the replay that holds vcudart to it."""
