"""What the host application hands the viewer: one :class:`ViewerScope` per request.

The viewer never opens a store or checks a key itself. The host (``tmem ui`` locally, ``tmem serve`` for tenants)
passes a :data:`ScopeResolver`: given the API key the request carried (``Authorization: Bearer KEY`` or the viewer's
cookie; None when it carried none) it returns the scope the key may see, or None when the key is missing or wrong
(the viewer then asks for one). A scope is a :class:`~tmem.memory.Memory` and the tenant whose spaces it shows (by
their names, each a :class:`tmem.scope.Scope` of that tenant), or no tenant: the local user, who sees every space.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from tmem.errors import NotFoundError
from tmem.memory import Memory
from tmem.models import SpaceSummary
from tmem.scope import Scope


class JobView(BaseModel):
    """A build job as the viewer shows it (the service maps its own job records onto this)."""

    model_config = ConfigDict(frozen=True)

    id: str
    state: str = Field(description="queued, running, succeeded or failed.")
    stage: str | None = Field(default=None, description="The stage under way, if known.")
    fraction: float | None = Field(default=None, ge=0, le=1, description="Progress from 0 to 1, if known.")
    note: str | None = None
    created_at: str | None = Field(default=None, description="As the host records it (shown as given).")
    finished_at: str | None = None
    error: str | None = None

    @property
    def percent(self) -> int | None:
        return None if self.fraction is None else round(100 * self.fraction)


JobsProvider = Callable[[Scope], Sequence[JobView]]


@dataclass(frozen=True)
class ViewerScope:
    """The memory a request may see: tenant ``tenant``'s spaces by their names, or with no tenant (the local user)
    every space, named as the library names them."""

    memory: Memory
    tenant: str | None = None
    jobs: JobsProvider | None = None

    def key(self, name: str) -> Scope:
        """The scope of this scope's existing space shown as ``name``. NotFoundError otherwise, naming only this
        scope's spaces."""
        self.summary(name)
        return Scope(self.tenant, name) if self.tenant else Scope.local(name)

    def spaces(self) -> list[SpaceSummary]:
        """This scope's spaces, named as shown."""
        if not self.tenant:
            return self.memory.spaces()
        return [s for s in self.memory.core.tenant_spaces(self.tenant) if "/" not in s.name]  # a service name has none

    def summary(self, name: str) -> SpaceSummary:
        """One space's summary; NotFoundError naming the scope's spaces when absent."""
        spaces = self.spaces()
        for summary in spaces:
            if summary.name == name:
                return summary
        known = ", ".join(s.name for s in spaces) or "none yet"
        raise NotFoundError(f"No space {name!r}. Known spaces: {known}.")

    def build_jobs(self, name: str) -> list[JobView] | None:
        """The space's build jobs, or None when the host keeps none (``tmem ui`` builds from the CLI)."""
        return None if self.jobs is None else list(self.jobs(self.key(name)))


ScopeResolver = Callable[[str | None], ViewerScope | None]
