"""A black-box episode: episodic's BlackBoxEnv beer_pong against fancy_gym's ProMP beer pong, side
by side in one run.

    python benchmarks/blackbox.py [--rounds 5] [--episodes 8] [--peer-python PATH]

One black-box episode is ``reset`` then ``step`` (a whole throw) on each side, with a random
ProMP action:
- ours: ``BlackBoxEnv("beer_pong", primitive="promp")`` (an in-process runner keeping no episodes),
  ``N_WEIGHTS`` weights per joint within +-``SCALE`` rad, a ``DURATION`` s motion and a
  ``HOLD`` s hold: 3 s of simulated time, the peer's, at our physics step (0.5 ms, 4 substeps of
  the 2 ms control step) and the task's release time;
- the peer: ``gymnasium.make("fancy_ProMP/BeerPong-v0")`` (fancy_gym 0.3.0: a WAM in MuJoCo,
  Euler, no air, a PD tracking controller in Python every 10 ms, 300 steps = 3 s per episode,
  ProMP weights and the release time as the action), in its own interpreter (``--peer-python``:
  fancy_gym pins mujoco 2.3.3, numpy < 2 and gymnasium < 1), measured twice: as shipped (5 ms
  physics step, 2 per control step), and at our physics step (0.5 ms, ``frame_skip`` 10: the
  same 10 ms control step and the same 3 s).
Goal: ours at least as many episodes/s as the peer at our physics step (ratio >= 1); the ratio
to the peer as shipped is printed beside it. The three are interleaved round by round
(``--episodes`` each per round); each round's figure is its median episode, and the table shows
the median over rounds and the range. Beside the rates: simulated steps per episode (control
steps run, for ours: motion and hold as BlackBoxEnv's info reports them; the peer's
``trajectory_length``) and how the time of our episode divides between the compiled loop and the
rest.

The peer's interpreter, made once (the install brings torch, for mp_pytorch):

    python -m venv /tmp/peer && /tmp/peer/bin/pip install fancy-gym==0.3.0 "gymnasium[mujoco]==0.29.1" "numpy<2"

Without it (no ``--peer-python``, or fancy_gym does not import there) the script says so and
compares with the figure of the peer measured on a quiet machine of this kind (``PEER_QUIET``).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

import episodic.native
from episodic.learning.gym_env import BlackBoxEnv

N_WEIGHTS, SCALE, DURATION, HOLD = 3, 0.1, 2.0, 1.0  # ours: ProMP weights per joint, rad, s, s
PEER_QUIET = 40.5e-3  # s per episode: fancy_gym's ProMP beer pong as shipped on a quiet machine (issue 33)
PEER_STEP = 0.0005  # s: our physics step, for the peer
# the peer: reads "TIMESTEP FRAME_SKIP N" lines, runs N episodes (reset, then step a random
# action) at that physics step and prints each one's s and trajectory length as JSON after
# "peer " (fancy_gym prints lines of its own when imported)
PEER = """
import json, logging, sys, time, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
import gymnasium as gym
import fancy_gym
env = gym.make("fancy_ProMP/BeerPong-v0")
raw = env.unwrapped
env.reset(seed=0)
env.action_space.seed(0)
print("peer", json.dumps({"mujoco": __import__("mujoco").__version__, "fancy_gym": "0.3.0",
                  "dt": raw.dt, "integrator": int(raw.model.opt.integrator)}), flush=True)
for line in sys.stdin:
    timestep, frame_skip, n = line.split()
    raw.model.opt.timestep, raw.frame_skip = float(timestep), int(frame_skip)
    out = []
    for _ in range(int(n)):
        action = env.action_space.sample()
        t0 = time.perf_counter()
        env.reset()
        info = env.step(action)[4]
        out.append((time.perf_counter() - t0, int(info["trajectory_length"])))
    print("peer", json.dumps(out), flush=True)
"""


@dataclass
class Row:
    """Per round: the median episode s and control steps per episode; for ours also the share of
    the episode inside the compiled loop."""

    label: str
    seconds: list[float] = field(default_factory=list)
    steps: list[float] = field(default_factory=list)
    loop_share: list[float] = field(default_factory=list)

    def rate(self) -> tuple[float, float, float]:
        """Episodes/s: the median over rounds, and the lowest and highest round."""
        rates = [1.0 / s for s in self.seconds]
        return statistics.median(rates), min(rates), max(rates)


class Peer:
    """fancy_gym's ProMP beer pong in ``python`` (a process of its own)."""

    def __init__(self, python: str):
        self.proc = subprocess.Popen([python, "-c", PEER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        try:
            self.about = self._answer()
        except EOFError:
            self.proc.wait()
            raise RuntimeError(f"fancy_gym does not run in {python}") from None

    def _answer(self):
        """The JSON of the peer's next line that starts with "peer "."""
        for line in self.proc.stdout:
            if line.startswith("peer "):
                return json.loads(line[5:])
        raise EOFError

    def run(self, timestep: float, frame_skip: int, n: int) -> tuple[float, float]:
        """The median s and trajectory length of n episodes at ``timestep`` s."""
        self.proc.stdin.write(f"{timestep} {frame_skip} {n}\n")
        self.proc.stdin.flush()
        out = self._answer()
        return statistics.median(s for s, _ in out), statistics.median(k for _, k in out)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


class Ours:
    """BlackBoxEnv beer_pong with random ProMP actions; the compiled loop's time is measured by
    wrapping episodic.native's segment call."""

    def __init__(self):
        self.env = BlackBoxEnv("beer_pong", primitive="promp", n_weights=N_WEIGHTS, duration=DURATION, hold=HOLD,
                               scale=SCALE)
        self.env.reset(seed=0)
        self.env.action_space.seed(0)
        self.in_loop = 0.0
        native_run = episodic.native.run

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return native_run(*args, **kwargs)
            finally:
                self.in_loop += time.perf_counter() - t0

        episodic.native.run = timed
        self.aborted = 0

    def run(self, n: int) -> tuple[float, float, float]:
        """The median s and control steps of n episodes, and the share of their time in the loop."""
        times, steps, total, loop = [], [], 0.0, 0.0
        for _ in range(n):
            action = self.env.action_space.sample()
            before = self.in_loop
            t0 = time.perf_counter()
            self.env.reset()
            info = self.env.step(action)[4]
            times.append(time.perf_counter() - t0)
            total, loop = total + times[-1], loop + self.in_loop - before
            steps.append(info["steps"])
            self.aborted += info["flag"] != "OK"
        return statistics.median(times), statistics.median(steps), loop / total

    def close(self) -> None:
        self.env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=8, help="episodes per side per round")
    parser.add_argument("--peer-python", help="a Python with fancy_gym 0.3.0 installed (module docstring)")
    args = parser.parse_args()
    ours = Ours()
    peer = None
    if args.peer_python:
        try:
            peer = Peer(args.peer_python)
        except (OSError, RuntimeError) as error:
            print(f"no peer: {error}")
    rows = {"ours": Row("episodic BlackBoxEnv beer_pong, 0.5 ms")}
    if peer is not None:
        rows["shipped"] = Row(f"fancy_gym ProMP BeerPong, as shipped ({peer.about['dt'] / 2 * 1e3:g} ms)")
        rows["fine"] = Row(f"fancy_gym ProMP BeerPong at {PEER_STEP * 1e3:g} ms")
    ours.run(2)  # warm-up: caches, the compiled law, the first go-to-start
    if peer is not None:
        peer.run(0.005, 1, 2)
    for _ in range(args.rounds):
        seconds, steps, share = ours.run(args.episodes)
        rows["ours"].seconds.append(seconds)
        rows["ours"].steps.append(steps)
        rows["ours"].loop_share.append(share)
        if peer is not None:
            for key, (timestep, skip) in (("shipped", (0.005, 1)), ("fine", (PEER_STEP, 10))):
                s, k = peer.run(timestep, skip, args.episodes)
                rows[key].seconds.append(s)
                rows[key].steps.append(k)
    ours.close()
    if peer is not None:
        peer.close()
    print(f"black-box episodes (reset + one step = one throw), {args.rounds} interleaved rounds of "
          f"{args.episodes} episodes each; median over rounds (range)")
    if peer is not None:
        print(f"peer: fancy_gym {peer.about['fancy_gym']}, mujoco {peer.about['mujoco']} "
              f"(ours: mujoco {__import__('mujoco').__version__})")
    print(f"  {'':48s}{'episodes/s':>11s}{'range':>16s}{'ms/episode':>12s}{'steps':>7s}")
    for row in rows.values():
        median, low, high = row.rate()
        print(f"  {row.label:48s}{median:11.1f}   {low:6.1f}-{high:<6.1f}{1e3 / median:11.1f}"
              f"{statistics.median(row.steps):7.0f}")
    share = statistics.median(rows["ours"].loop_share)
    print(f"  ours: {100 * share:.0f} % of an episode in the compiled loop; {ours.aborted} of "
          f"{args.rounds * args.episodes} episodes ended early")
    mine = rows["ours"].rate()[0]
    if peer is None:
        ratio = mine * PEER_QUIET
        print(f"fancy_gym is not measured here: against its {PEER_QUIET * 1e3:.1f} ms per episode as shipped on a "
              f"quiet machine (not side by side) ours is {ratio:.2f}x")
        return
    fine, shipped = rows["fine"].rate()[0], rows["shipped"].rate()[0]
    ratio = mine / fine
    print(f"goal: ours >= the peer at our physics step: {ratio:.2f}x  {'PASS' if ratio >= 1 else 'FAIL'}"
          f"   (against the peer as shipped: {mine / shipped:.2f}x)")


if __name__ == "__main__":
    sys.exit(main())
