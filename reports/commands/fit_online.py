"""``crowdrank fit --method online``: run one online method and write its posterior.

Called by :mod:`reports.commands.fit` as ``run(args, data, priors)`` with the data and the
priors already built (the same priors NUTS would get). Writes ``DIR/posterior.json`` (the
JSON of ``docs/contracts.md``, also a state to resume from with ``--state-in``) and
``DIR/items.csv`` (items sorted by ``mu``, best first).
"""

from __future__ import annotations

from pathlib import Path

from models.data import DataError


def _wl_params(args) -> dict | None:
    """Weng–Lin parameters given on the command line (the rest keep their defaults)."""
    given = {key: getattr(args, f"wl_{key}", None) for key in ("beta", "kappa", "tau", "gamma")}
    given = {k: v for k, v in given.items() if v is not None}
    return given or None


def run(args, data, priors) -> int:
    from inference.online import OnlinePosterior, fit_online

    if args.model == "couple-normalized":
        raise DataError("there is no online update for normalised COUPLE; use --model couple "
                        "(OnlineGBMM) or --method nuts", "--model")
    state_in = getattr(args, "state_in", None)
    state = OnlinePosterior.from_json(state_in) if state_in else None
    post = fit_online(
        data, args.model, priors, taylor=getattr(args, "taylor", "paper"),
        score_alpha=getattr(args, "score_alpha", "updated"),
        order=getattr(args, "order", "file"), seed=int(getattr(args, "seed", 0)),
        passes=int(getattr(args, "passes", 1)), strict=bool(getattr(args, "strict", False)),
        state=state, progress=not getattr(args, "no_progress", False),
        kappa=float(getattr(args, "kappa", 1e-4)), kappa2=float(getattr(args, "kappa2", 1e-4)),
        bt_breaking=getattr(args, "bt_breaking", "game"), wl_params=_wl_params(args))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    post.to_json(out / "posterior.json")
    post.items_table().to_csv(out / "items.csv", index=False, float_format="%.17g")
    clamps = {k: v for k, v in post.clamped.items() if v}
    print(f"{post.algorithm}: {post.n_rankings} rankings, {len(post.items)} items, "
          f"{len(post.workers)} workers, {post.seconds:.3f} s; guards: {clamps or 'none'}; "
          f"wrote {out / 'posterior.json'} and {out / 'items.csv'}")
    return 0
