"""The learner's side: movement primitives, policy search, demonstrations, robustness to noise,
and the Gymnasium face (one step = one episode)."""
