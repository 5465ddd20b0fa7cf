"""The NumPyro programs, one module per model family (:mod:`crowdrank.models.numpyro_models`
re-exports every public name): :mod:`.blocks` (dense-block kernels), :mod:`.pl` (PL, BT,
CrowdBT, PeerGrader), :mod:`.couple` (COUPLE by autodiff, the normalised model, draws),
:mod:`.couple_fast` (COUPLE's hand-written derivatives), :mod:`.program` (the program and
its observed site), :mod:`.arrays` (the models as functions of arrays, for the
ecosystem's tools)."""
