"""The second backend (issue 35): FlashInfer's CUTLASS dense GEMMs, one case per autotuner tactic
(its CTA tile and swap_ab) of a family FlashInfer's JIT instantiates for an architecture.

Which tactics FlashInfer offers is read from its generator and runners (:mod:`.offered`); a case's
translation unit is what FlashInfer's JIT renders from its own template with its own flags
(:mod:`.generator`, :mod:`.unit`), built through the core's build cache and run on the virtual
device (:mod:`.backend`, :mod:`.report`).
"""

#: The backend's name, as a matrix's ``backend:`` gives it.
NAME = "flashinfer-cutlass-dense"
