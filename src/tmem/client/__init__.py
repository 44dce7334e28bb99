"""Python clients of the HTTP service (``tmem serve``) with :class:`tmem.Memory`'s method names, arguments and return
types, so code switches from an embedded memory to a server in one line::

    mem = Memory.open("~/.tmem")                       # embedded
    mem = Client("http://127.0.0.1:8080", key)         # the same calls, answered by a server

:class:`Client` is synchronous, :class:`AsyncClient` is the twin of :class:`tmem.AsyncMemory`. Errors are tmem's
exceptions (:mod:`tmem.errors`): the server's problem details keep their message; a server that cannot be reached is a
:class:`~tmem.errors.StoreError` naming the URL. What differs from an embedded memory is in docs/service.md
("Python client").
"""

from tmem.client.clients import AsyncClient, Client

__all__ = ["AsyncClient", "Client"]
