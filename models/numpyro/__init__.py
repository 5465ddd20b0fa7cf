"""The NumPyro programs, one module per model family (:mod:`crowdrank.models.numpyro_models`
re-exports every public name): :mod:`.blocks` (dense-block kernels), :mod:`.pl` (PL, BT,
CrowdBT, PeerGrader), :mod:`.couple` (COUPLE by autodiff, the normalised model, draws),
:mod:`.couple_fast` (COUPLE's hand-written derivatives), :mod:`.program` (the program and
its observed site), :mod:`.arrays` (the models as functions of arrays, for the
ecosystem's tools)."""

import numpyro as _numpyro

# ArviZ (arviz_base.io_numpyro) may have put a lazy placeholder for numpyro in sys.modules
# (lazy_loader): the package body runs only on its first attribute access, and a numpyro
# submodule imported before that leaves numpyro.distributions without its `distribution`
# attribute (numpyro.factor then fails). Touching the package runs it first
# (tests/test_import_order.py).
_numpyro.__version__  # noqa: B018
