"""Several accelerators in one request (issue 26, part 1): each planned on its own hardware (proven optimal there, as
`plan` alone would answer), then ranked by one objective. A service over `planner.api.plan`; the CLI's
`plan --gpu h100,h200,b200,gb200-nvl72 --objective cost` renders it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from planner import api
from planner.errors import Infeasible, InvalidInput, is_number
from planner.hardware import hardware_names
from planner.schema import AcceleratorOption, Comparison, Objective, Plan
from planner.schema.request import PlanRequest, check_price

PAPER_SCENARIOS = ("h100-superpod", "h100-low-latency", "h100-global-nvlink", "h100-global-nvlink-ll",
                   "h100-infinite-ll")
"""The paper's hypothetical H100 variants (§5.1.2, §6.3.1, Table 4): not products, so `--gpu all` leaves them out."""

OBJECTIVES: dict[str, str] = {
    "cost": "cost_usd (USD for the wall-clock time held), then wall-clock days, then GPUs",
    "gpus": "GPUs, then wall-clock days, then cost_usd",
    "days": "wall-clock days, then cost_usd, then GPUs",
    "energy": "energy_MWh (facility energy), then cost_usd, then wall-clock days",
}
"""Each objective's key and tie-breaks, in words (Comparison.ranked_by)."""

_KEYS: dict[str, tuple[str, ...]] = {"cost": ("cost_usd", "wall_clock_days", "gpus"),
                                     "gpus": ("gpus", "wall_clock_days", "cost_usd"),
                                     "days": ("wall_clock_days", "cost_usd", "gpus"),
                                     "energy": ("energy_MWh", "cost_usd", "wall_clock_days")}

MAX_ACCELERATORS = 32
"""Most accelerators one comparison plans (each is a full search)."""


def accelerator_names(text: str) -> list[str]:
    """'h100,h200' -> ['h100', 'h200']; 'all' -> every shipped system but the paper's hypothetical variants."""
    parts = [t.strip() for t in text.split(",")]
    if len(parts) > 1 and "" in parts:  # 'h100,' or 'h100,,b200': a name left out, not a one-accelerator ranking
        raise InvalidInput(f"--gpu {text!r} leaves a name empty (a comma with no accelerator beside it); list "
                           "them, e.g. --gpu h100,h200,b200")
    names = [t for t in parts if t]
    if names == ["all"]:
        return [n for n in hardware_names() if n not in PAPER_SCENARIOS]
    if "all" in names:
        raise InvalidInput("--gpu all stands alone; or list the accelerators, e.g. --gpu h100,h200,b200")
    if len(set(names)) != len(names):
        raise InvalidInput(f"--gpu names an accelerator twice: {text}")
    if not 1 <= len(names) <= MAX_ACCELERATORS:
        raise InvalidInput(f"--gpu takes 1 to {MAX_ACCELERATORS} accelerators, got {len(names)}")
    return names


def parse_prices(items: Sequence[str]) -> dict[str, float]:
    """['h100=2.5', 'b200=6'] -> {'h100': 2.5, 'b200': 6.0} (USD per GPU-hour for one accelerator)."""
    out: dict[str, float] = {}
    for item in (part for given in items for part in given.split(",")):  # h100=2.5,b200=6 reads as two
        name, sep, value = item.partition("=")
        try:
            price = float(value)
        except ValueError:
            price = math.nan
        if not sep or not name.strip() or not (math.isfinite(price) and price > 0):
            raise InvalidInput(f"--gpu-price {item!r}: give NAME=USD with a positive price, e.g. h100=2.5")
        if name.strip() in out:
            raise InvalidInput(f"--gpu-price prices {name.strip()} twice")
        check_price("--gpu-price", price, item)
        out[name.strip()] = price
    return out


def _figures(plan: Plan) -> dict[str, Any]:
    """The figures an option is ranked by, from its plan (planner.economics prices and powers every plan)."""
    wall = plan.wall_clock_days if plan.wall_clock_days is not None else plan.training_days
    return {"gpus": plan.gpus, "racks": plan.racks, "nodes": plan.nodes, "wall_clock_days": wall,
            "cost_usd": plan.cost_usd, "compute_cost_usd": plan.compute_cost_usd,
            "price_per_gpu_hour": plan.price_per_gpu_hour, "mfu": plan.mfu,
            "facility_power_MW": plan.facility_power_MW, "energy_MWh": plan.energy_MWh,
            "warnings": list(plan.warnings)}


def compare(hardware: Sequence[str], *, objective: Objective = "cost", prices: Mapping[str, float] | None = None,
            request: PlanRequest | None = None, **fields: Any) -> Comparison:
    """Plan the same request on each accelerator of `hardware` (names or TOML paths) and rank the plans by
    `objective`. The request is `request` (its `gpu` replaced by each name) or the PlanRequest `fields` build.
    `prices` overrides the price per GPU-hour of single accelerators (by name); the others keep the request's
    `price_per_gpu_hour`, else their hardware file's. An option that cannot meet the request keeps its infeasible
    plan and says why; bad input for every option (an unknown name, a bad --days) raises InvalidInput."""
    if objective not in OBJECTIVES:
        raise InvalidInput(f"unknown objective '{objective}'; choose one of {', '.join(OBJECTIVES)}")
    if request is not None and fields:
        raise InvalidInput("give a PlanRequest or its fields, not both")
    base = request if request is not None else PlanRequest(gpu=hardware[0], **fields)
    prices = dict(prices or {})
    for name, price in prices.items():  # bad input, as for the whole request: before any search
        if not is_number(price):
            raise InvalidInput(f"--gpu-price {name}: a price is a number of USD per GPU-hour, got {price!r}")
        check_price("--gpu-price", price, f"{name}={price:g}")
    unknown = sorted(set(prices) - set(hardware))
    if unknown:
        raise InvalidInput(f"--gpu-price names {', '.join(unknown)}, which is not among --gpu {','.join(hardware)}")
    for name in hardware:  # a misspelt name or a broken file: bad input for the whole request, before any search
        api.resolve_hardware(name)
    options: list[dict[str, Any]] = []
    for name in hardware:
        update: dict[str, Any] = {"gpu": name}
        if name in prices:
            update["price_per_gpu_hour"] = prices[name]
        try:
            plan = api.plan(base.model_copy(update=update))
            options.append({"hardware": name, "status": plan.status, "plan": plan, **_figures(plan)})
        except Infeasible as exc:
            doc = exc.plan
            why = (doc.explanation.splitlines()[0] if doc is not None and doc.explanation else str(exc))
            options.append({"hardware": name, "status": doc.status if doc is not None else "infeasible", "why": why,
                            "plan": doc})
        except InvalidInput as exc:
            if len(hardware) == 1:
                raise
            options.append({"hardware": name, "status": "error", "why": str(exc)})
    keys = _KEYS[objective]
    ranked, unranked = [], []
    for opt in options:
        if opt["status"] not in ("optimal", "feasible"):
            unranked.append(opt)
        elif opt.get(keys[0]) is None:
            missing = {"cost_usd": "no price in its hardware file: give --price-per-gpu-hour or --gpu-price NAME=USD",
                       "energy_MWh": "no power figures in its hardware file"}.get(keys[0], f"no {keys[0]}")
            unranked.append({**opt, "why": missing})
        else:
            ranked.append(opt)
    inf = math.inf
    ranked.sort(key=lambda o: tuple(inf if o.get(k) is None else o[k] for k in keys) + (o["hardware"],))
    out = [AcceleratorOption(rank=k + 1, **o) for k, o in enumerate(ranked)]
    out += [AcceleratorOption(rank=None, **o) for o in unranked]
    notes = []
    if any(o.plan is not None and o.plan.profile == "paper" for o in out):
        # the paper profile prices an idealised GEMM from on-chip bandwidths that are estimates for the newer GPUs
        # (hardware_specs/*.toml), so its ranking can differ from the validated profile's
        notes.append("priced by the paper profile, the paper's idealised model; for a purchase decision rank with "
                     "--profile realistic, the profile validated against published runs (docs/validation.md): "
                     "the two can rank accelerators differently")
    if any(o.status == "feasible" for o in out):
        notes.append("an option marked 'feasible' was not proven optimal (its search hit the time limit): its "
                     "figures may improve with --time-limit")
    return Comparison(objective=objective, ranked_by=OBJECTIVES[objective], best=out[0].hardware if ranked else None,
                      options=out, notes=notes)
