"""C51 (Bellemare et al. 2017, "A Distributional Perspective on Reinforcement Learning"): DQN's replay memory and
target network, with each action's return learned as a categorical distribution on --num_atoms fixed atoms from
--v_min to --v_max, by the cross-entropy against the projected distributional Bellman target. With n-step returns and
prioritised replay it is Dopamine's Rainbow, with noisy networks, dueling and double DQN Hessel et al.'s.
`agent.C51Agent`, `learner.CategoricalLearner`; `AGENT` is its registry entry, with its own settings."""
from hvd_dqn.agent.c51.settings import C51Settings
from hvd_dqn.agent.registry import AgentEntry



def dopamine_counterpart(settings):
    """Dopamine publishes C51 and its Rainbow (C51 with n-step returns and prioritised replay, rainbow.gin); C51 with
    noisy networks (Hessel et al.'s full Rainbow) has no published Dopamine curve here."""
    if settings.get("noisy_nets"):
        return "full Rainbow", None
    if settings.get("n_step", 1) > 1 and settings.get("prioritized_replay"):
        return "Rainbow", "Rainbow"
    return "C51", "C51"


AGENT = AgentEntry(
    name="c51", title="C51",
    summary="C51 (Bellemare et al. 2017): each action's return as a distribution on --num_atoms atoms from --v_min to "
            "--v_max, learned by the cross-entropy against the projected Bellman target and acted on by its mean; "
            "DQN's replay memory, target network and extensions. With --n_step=3 and --prioritized_replay it is "
            "Dopamine's Rainbow; add --noisy_nets, --dueling and --double_dqn for Hessel et al.'s full Rainbow.",
    implementation="hvd_dqn.agent.c51.agent:C51Agent",
    without_them="learns a categorical distribution of the return on fixed atoms",
    settings_class=C51Settings, acts_ahead=True,
    checks="hvd_dqn.agent.c51.checks:check_settings",
    shapes_checkpoint=("num_atoms", "dueling", "noisy_nets"),
    # the standard deviation of the return distribution of the actions taken, mean over the minibatch
    update_metrics=("return_std",), dopamine=dopamine_counterpart,
    known_as={"rainbow": "Dopamine's Rainbow is --agent=c51 with configs/breakout_rainbow.flags (3-step returns and "
                         "prioritised replay); add --noisy_nets --dueling --double_dqn for Hessel et al.'s full "
                         "Rainbow"})
