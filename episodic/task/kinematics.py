"""Inverse kinematics for scripted references and learners: :class:`SiteIK` puts a site of the
scene (a racket's centre, a hook's anchor) at a position, optionally with its x axis along a
direction, by damped least squares over the robot's joints within their range."""
from __future__ import annotations

import mujoco
import numpy as np


class SiteIK:
    """Damped-least-squares inverse kinematics of a site's position and of its x axis (either
    sign: a racket's face normal, a hook's axis) over the robot's joints, on a private MjData
    (the model's own data is never touched).

    site: the site's name; qpos_adr, dof_adr: (n_dofs,) addresses of the robot's joints
    (Scene.qpos_adr, Scene.dof_adr); lower, upper: (n_dofs,) rad, the joint range."""

    def __init__(self, model: mujoco.MjModel, site: str, qpos_adr, dof_adr, lower, upper):
        self.model, self.data = model, mujoco.MjData(model)
        self.qpos_adr, self.dof_adr = np.asarray(qpos_adr), np.asarray(dof_adr)
        self.lower, self.upper = np.asarray(lower, float), np.asarray(upper, float)
        self.site = model.site(site).id
        self._jp, self._jr = np.zeros((3, model.nv)), np.zeros((3, model.nv))

    def pose(self, q: np.ndarray, axis: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The site's position (3,) m and x axis (3,) at posture q (n_dofs,) rad (or, given
        ``axis`` (3,), that direction of the site's frame, in the world)."""
        self.data.qpos[self.qpos_adr] = q
        mujoco.mj_kinematics(self.model, self.data)
        frame = self.data.site_xmat[self.site].reshape(3, 3)
        return self.data.site_xpos[self.site].copy(), (frame[:, 0] if axis is None else frame @ axis).copy()

    def jacobian(self, q: np.ndarray) -> np.ndarray:
        """(6, n_dofs) at posture q: the site's velocity m/s and angular velocity rad/s per joint rate rad/s."""
        self.pose(q)
        mujoco.mj_comPos(self.model, self.data)
        mujoco.mj_jacSite(self.model, self.data, self._jp, self._jr, self.site)
        return np.vstack([self._jp[:, self.dof_adr], self._jr[:, self.dof_adr]])

    def solve(self, q0: np.ndarray, position: np.ndarray, normal: np.ndarray | None = None,
              iterations: int = 200, tolerance: float = 1e-7, damping: float = 0.02,
              normal_weight: float = 0.3, axis: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """A posture (n_dofs,) rad near q0 within the joint range putting the site at ``position``
        (3,) m (and its x axis, or the direction ``axis`` (3,) of its frame, along ``normal``,
        either way round, when given); returns it and the remaining error (m + rad)."""
        q = np.clip(np.asarray(q0, float).copy(), self.lower, self.upper)
        for _ in range(iterations):
            p, x = self.pose(q, axis)
            errors = [position - p]
            if normal is not None:
                errors.append(normal_weight * np.cross(x, normal if x @ normal >= 0 else -normal))
            e = np.concatenate(errors)
            if np.linalg.norm(e) < tolerance:
                break
            J = self.jacobian(q)
            J = J[:3] if normal is None else np.vstack([J[:3], normal_weight * J[3:]])
            dq = J.T @ np.linalg.solve(J @ J.T + damping**2 * np.eye(len(e)), e)
            dq *= min(1.0, 0.2 / max(np.max(np.abs(dq)), 1e-12))
            q = np.clip(q + dq, self.lower, self.upper)
        p, x = self.pose(q, axis)
        error = float(np.linalg.norm(position - p))
        if normal is not None:
            error += float(np.linalg.norm(np.cross(x, normal)))
        return q, error
