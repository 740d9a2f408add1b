"""Shared-memory bridge between a learner process and the runner (layout in docs/protocol.md).

Learner side: ``from bridge import Client``. Runner side: ``bridge.endpoint.Endpoint``.
"""
from bridge.client import Client, ProtocolError, RunnerGone

__all__ = ["Client", "ProtocolError", "RunnerGone"]
