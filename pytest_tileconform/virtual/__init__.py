"""Judging host-side stages for any GPU architecture on a machine without a GPU.

A harness is linked against ``vcudart`` (``runtime/vcudart.cpp``), a CUDA runtime that
executes no kernel but answers every host-side question (device attributes, the shared-memory
opt-in, TMA descriptor encoding, launch configuration checks) from an architecture profile
(:mod:`.profiles`) and the kernels' resource usage read from the executable (:mod:`.resources`).
:mod:`.build` makes the virtual build from the hardware build's nvcc command; :mod:`.run` runs it
and reads back the call log and the harness's verdict.
"""
