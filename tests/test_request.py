"""The plan question as one document (planner.schema.request, issue 29): validated once, the same answer as the keyword
form, and a file that reads back as the same request."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from planner import api
from planner.errors import InvalidInput
from planner.goodput import get_failure_model
from planner.hardware import get_hardware
from planner.schema.request import PlanRequest
from planner.workload import load_model_preset


def test_the_request_and_the_keyword_form_give_the_same_plan():
    by_keywords = api.plan(1e24, "h100", 90, time_limit_s=30)
    by_request = api.plan(PlanRequest(compute_flop=1e24, gpu="h100", days=90, time_limit_s=30))
    # the paper profile's plan of 1e24 FLOP in 90 days (tests/test_golden.py's neighbourhood): found by both forms
    assert by_keywords.gpus == by_request.gpus and by_keywords.layout == by_request.layout
    assert by_request.status == "optimal"


@pytest.mark.parametrize("request_", [
    PlanRequest(compute_flop=1e24, days=30, sparse=True, fixed={"recompute": 2}, overrides=("gpu.hbm_GB=96",),
                memory_headroom_GB=1.5, price_per_gpu_hour=2.5, goodput=False),
    PlanRequest(workload=load_model_preset("llama3-8b"), gpus=64, profile="realistic", runs_on="megatron"),
    PlanRequest(compute_flop=1e25, gpu=get_hardware("h100"), failures=get_failure_model("default"), dp_overlap=True,
                time_limit_s=120),
], ids=["compute", "preset-workload", "hardware-object"])
def test_a_request_round_trips_through_json_and_toml(request_):
    assert PlanRequest.from_json(request_.to_json()) == request_
    assert PlanRequest.from_toml(request_.to_toml()) == request_


def test_no_time_limit_is_json_only():
    unlimited = PlanRequest(compute_flop=1e24, time_limit_s=None)
    assert PlanRequest.from_json(unlimited.to_json()) == unlimited
    with pytest.raises(InvalidInput, match="TOML has no null: time_limit_s"):
        unlimited.to_toml()


def test_derived_requests_are_validated_again():
    base = PlanRequest(compute_flop=1e24)
    assert base.model_copy(update={"compute_flop": 1e25}).compute_flop == 1e25
    with pytest.raises(InvalidInput, match=r"^--days must be a positive finite number, got -1$"):
        base.model_copy(update={"days": -1})
    with pytest.raises(InvalidInput, match=r"^give either --compute or an explicit shape/preset, not both$"):
        base.model_copy(update={"workload": load_model_preset("llama3-8b")})


@pytest.mark.parametrize("fields, message", [
    ({"compute_flop": 1e24, "solver": "gurobi"}, "unknown solver 'gurobi'; choose one of cpsat, exhaustive"),
    ({"compute_flop": 1e24, "workers": 0}, "--workers must be a whole number from 1 to 256, got 0"),
    ({"compute_flop": 1e24, "gpus": True}, None),
    ({}, "give --compute FLOP, a model preset, or an explicit shape"),
    ({"compute_flop": 1e24, "memory_headroom_GB": -1}, "memory headroom must be a finite number of GB >= 0, got -1"),
    ({"compute_flop": 1e24, "runs_on": "deepspeed"}, "unknown framework 'deepspeed'; choose one of megatron, "
                                                      "torchtitan"),
    ({"compute_flop": 1e24, "colour": "red"}, "colour: Extra inputs are not permitted"),
])
def test_bad_requests_are_one_line_invalid_input(fields, message):
    with pytest.raises(InvalidInput) as exc:
        PlanRequest(**fields)
    assert "\n" not in str(exc.value)
    if message is not None:
        assert str(exc.value) == message


def test_deadline_defaults_to_90_days_only_without_gpus():
    assert PlanRequest(compute_flop=1e24).deadline_days == 90.0
    assert PlanRequest(compute_flop=1e24, gpus=64).deadline_days is None
    assert PlanRequest(compute_flop=1e24, gpus=64, days=30).deadline_days == 30.0


@pytest.mark.parametrize("columns", [80, 120])
def test_the_sweep_table_fits_the_terminal(columns):
    from planner.render.sweep import sweep_table
    from planner.sweep import sweep

    res = sweep(["h100", "a100"], 1e21, 1e23, 3, days=90.0, time_limit_s=20.0, jobs=1, price_per_gpu_hour=2.0)
    buf = io.StringIO()
    Console(file=buf, width=columns).print(sweep_table(res, columns))
    lines = buf.getvalue().splitlines()
    assert max(len(line) for line in lines) <= columns
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) == 6  # one line per point: nothing wrapped
    assert all("…" not in line for line in rows)  # nothing cut
    headers = next(line for line in lines if line.startswith("┃"))
    assert "hardware" in headers and "requested FLOP" in headers and "GPUs" in headers and "MFU" in headers


@pytest.mark.slow  # worker processes: about 14 s on 2 shared cores
def test_plan_all_answers_a_list_of_requests_in_order():
    from planner.sweep import plan_all

    base = PlanRequest(compute_flop=1e22, days=30, time_limit_s=30, workers=1)
    requests = [base, base.model_copy(update={"compute_flop": 1e23}),
                base.model_copy(update={"gpus": 1, "days": 0.01})]  # one GPU cannot train 1e22 FLOP in 15 minutes
    seen: list[int] = []
    plans = plan_all(requests, jobs=2, finished=lambda k, _: seen.append(k))
    assert sorted(seen) == [0, 1, 2]
    assert [p.gpus for p in plans[:2]] == [api.plan(r).gpus for r in requests[:2]]
    assert plans[2].status == "infeasible" and plans[2].explanation
