"""The application layer: one method per operation, a principal in, authorization and defaults once.

:class:`Application` is what every door calls (the HTTP routes of the API Lambda and ``cairn
serve``, the MCP tools, the CLI, the in-process :class:`~cairn.Cairn`);
:mod:`.policy` is the one rule of who may do what; :class:`Principal` is who is calling.
"""

from cairn.app.application import Application, FindAnswer
from cairn.app.policy import OPERATIONS, Operation
from cairn.app.principal import ROLES, Principal, Role

__all__ = ["OPERATIONS", "ROLES", "Application", "FindAnswer", "Operation", "Principal", "Role"]
