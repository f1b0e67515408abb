"""The second backend (issue 35), started: FlashInfer's CUTLASS dense GEMMs.

Today it only reads, from FlashInfer's own generator and runners, which configurations FlashInfer
instantiates and which tactics its autotuner offers per architecture and family
(:mod:`pytest_tileconform.flashinfer_dense.offered`); it judges nothing yet and registers no plugin.
"""
