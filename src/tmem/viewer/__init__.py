"""The memory viewer: what tmem remembered and why a memory was recalled, in a browser (docs/viewer.md).

    from tmem.viewer import ViewerScope, create_router
    app.include_router(create_router(lambda key: ViewerScope(memory)), prefix="/ui")

``tmem ui`` serves :func:`create_local_app` on 127.0.0.1; the service mounts :func:`create_router` with a resolver
that maps an API key to its tenant's scope.
"""

from tmem.util.extras import require_extra

require_extra("viewer", "tmem.viewer (the memory viewer)")

from tmem.viewer.app import (  # noqa: E402 - after the check, which names the extra to install
    COOKIE,
    LOCAL_HOSTS,
    PREFIX,
    VISIT_COOKIE,
    create_local_app,
    create_router,
    request_key,
)
from tmem.viewer.scope import JobView, ScopeResolver, ViewerScope  # noqa: E402

__all__ = [
    "COOKIE",
    "LOCAL_HOSTS",
    "PREFIX",
    "VISIT_COOKIE",
    "JobView",
    "ScopeResolver",
    "ViewerScope",
    "create_local_app",
    "create_router",
    "request_key",
]
