"""The limits document (`planner limits --json`): Section 5's closed-form bounds for one system, one row per
hardware (planner.limits computes them)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LimitsRow(BaseModel):
    """Section 5's closed-form bounds for one system, treating a node as one device (Table 2).

    An unbounded quantity (infinite network bandwidth -> T_critical) is written to JSON as the string "Infinity",
    which strict JSON parsers accept and which validates back to float('inf').
    """

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, ser_json_inf_nan="strings")

    hardware: str = Field(description="Hardware name.")
    gpus_per_device: int = Field(description="GPUs in the node treated as one device (the first network level).")
    c_mac_per_s: float = Field(description="C: node peak arithmetic, MAC/s (peak FLOP/s / 2; not sustained).")
    b_net_words_per_s: float = Field(description="B_net: node uplink bandwidth, one direction, words/s.")
    b_dram_words_per_s: float = Field(description="B_DRAM: node HBM bandwidth, half the total, words/s.")
    sram_words: float = Field(description="S: node on-chip SRAM (L2 + registers + L1/shared), words.")
    d_prime: float = Field(description="d' (Eq. 16): critical weight-submatrix side.")
    b_prime: float = Field(description="b' (§5.1.2): critical nanobatch, tokens.")
    weights_in_sram: bool = Field(description="S / d'^2 >= 4: weights and gradients fit in a replica's SRAM (b' = 16).")
    t_critical_flop: float = Field(description="T_critical (Eq. 13, or App. 8.3 if alpha != 0): bandwidth bound, FLOP.")
    t_critical_latency_flop: float = Field(
        description="Eq. 14 (App. 8.3 form if alpha != 0): latency bound on utilisation-preserving runs, FLOP."
    )
    t_limit_flop: float = Field(
        description="T_limit (Eq. 18, or App. 8.3 if alpha != 0): latency wall at any utilisation, FLOP.")
    n_params_limit: float = Field(description="N_p at the latency wall (Eq. 17, with App. 8.3's b/L if alpha != 0).")
    batch_tokens: float = Field(description="b (b0 of App. 8.3 when alpha != 0), tokens.")
    layers: float = Field(description="L (L0 of App. 8.3 when alpha != 0), MLP blocks.")
    experts: float = Field(description="E, sparsity factor (1 = dense).")
    t_train_s: float = Field(description="Training duration, seconds.")
    t_latency_s: float = Field(description="t_L, the latency timescale of one matmul plus its communication, seconds.")
    alpha: float = Field(description="App. 8.3 exponent difference alpha_b - alpha_L; 0 = Sections 5.1-5.2.")
    t0_mac: float = Field(
        description="App. 8.3 reference compute T0 as entered into the MAC formulas (unused at alpha = 0).")
    inferred: InferredWall | None = Field(
        None, description="The latency wall as `plan` finds it for the inferred shape (None: not computed).")


class InferredWall(BaseModel):
    """The latency wall `plan --compute C` reports past it ("at most about X FLOP"), beside the inputs that make it
    differ from Eq. 18's T_limit: there b, L and t_L are fixed (§5.1's 4e6 tokens, 100 layers, 9 µs); here the shape
    is the one `plan` infers at each compute (App. 8.1.4: b and L grow with it) and the latency is the hardware's
    critical path through one layer (planner.explain.floor_bound)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, ser_json_inf_nan="strings")

    compute_flop: float | None = Field(description="Largest compute whose inferred shape can finish within t_train "
                                       "(to ~1 %; an upper estimate, the real limit can be lower). None: not even "
                                       "the smallest accepted compute (1e18) can; inf: even the largest (1e40) can.")
    sparse: bool = Field(description="Sparse scaling law (E from App. 8.1.4), as `plan --compute --sparse`.")
    batch_law: str = Field(description="Batch-size law of the inferred shape ('paper', `plan`'s default).")
    profile: str = Field("paper", description="Execution profile that priced the critical path (the paper's: "
                         "`plan --compute`'s default, and the only one `limits` uses).")
    batch_tokens: float | None = Field(None, description="b of the inferred shape at that compute, tokens.")
    layers: float | None = Field(None, description="L of the inferred shape at that compute.")
    experts: float | None = Field(None, description="E of the inferred shape at that compute.")
    layer_critical_path_s: float | None = Field(None, description="Least time one microbatch spends in one layer, "
                                                "forward and backward, latencies included (the step floor / L).")
    eq18_flop: float | None = Field(None, description="Eq. 18 at this b, L, E and t_L = layer_critical_path_s / 4 "
                                    "(Eq. 17 counts 4 t_L per layer per step): the closed form with the planner's "
                                    "assumptions. None (and the shape fields) when compute_flop is None or inf.")


LimitsRow.model_rebuild()
