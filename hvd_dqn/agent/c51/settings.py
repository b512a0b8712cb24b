"""C51's own settings (Bellemare et al. 2017): the atoms of the return's distribution and their support."""
from __future__ import annotations

import dataclasses
from typing import Optional

from hvd_dqn.agent.dqn.settings import DoubleQSettings, DuelingSettings, NoisySettings, ReplaySettings
from hvd_dqn.settings import setting


@dataclasses.dataclass(frozen=True)
class C51Settings(ReplaySettings, DoubleQSettings, DuelingSettings, NoisySettings):
    num_atoms: int = setting(
        51, "C51: atoms of each action's return distribution, evenly spaced from --v_min to --v_max (Bellemare et "
            "al. 2017 and Dopamine's Atari presets: 51).", purpose="the return's categorical distribution")
    v_min: Optional[float] = setting(
        None, "C51: the lowest atom of the return's support, in the units of the (clipped, discounted) return; "
              "unset: -v_max (as Dopamine's vmin=None).", purpose="the return's categorical distribution", flag_type=float)
    v_max: float = setting(
        10.0, "C51: the highest atom of the return's support (Bellemare et al. 2017 and Dopamine's Atari presets: "
              "10, with rewards clipped to [-1, 1]).", purpose="the return's categorical distribution")
