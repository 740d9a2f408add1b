"""Shared-memory bridge between a learner process and the runner (layout in docs/protocol.md).

Learner side: ``from episodic.bridge import Client``. Runner side: ``episodic.bridge.serve.serve``
(an Endpoint in front of an in-process Runner until SIGINT/SIGTERM).
"""
from episodic.bridge.channel import ChannelInUse, ForeignChannel
from episodic.bridge.client import BatchError, Client, ProtocolError, RunnerGone

__all__ = ["BatchError", "ChannelInUse", "Client", "ForeignChannel", "ProtocolError", "RunnerGone"]
