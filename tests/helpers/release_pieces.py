"""Release features for tests of the generated unit's text: every piece present (as in the
releases that have them all, 0.7.2 on); tests of older releases read theirs from sources."""

from pytest_tileconform.flashinfer.features import ReleaseFeatures

EVERY_PIECE = ReleaseFeatures(
    activation_fusion=True,
    precomputed_scheduler=True,
    mixed_launcher=True,
    mixed_small_k=True,
    mixed_pre_mma=True,
    mixed_fp4_alias=True,
    mixed_packed_scales=False,
    mixed_pack_rule=False,
    mixed_weights="interleaved",
    uniform_fp4_alias=True,
    interleaves=(True, True, True),
)
