"""Where a store call reads and writes: :class:`Scope`, one tenant's space.

A space belongs to a tenant: the service's API keys name one, and the library and the CLI use the local tenant
``""``. The store keeps every row under both columns (``tenant``, ``space``); :attr:`Scope.key` is what its ``space``
column holds (``T/S``, or ``S`` for the local tenant), and nothing outside the store reads it. The rule every space
name follows is here (the service narrows its names further: :func:`tmem.store.control.check_name`).
"""

from __future__ import annotations

from dataclasses import dataclass

from tmem.errors import InputError, IntegrityError

LOCAL_TENANT = ""  # the tenant of a plain space name (the library's and the CLI's implicit local tenant)


def space_name_problem(name: str) -> str | None:
    """What is wrong with a space name, or None. Any non-empty string is a name (hostile names such as
    ``../../etc/passwd`` are just names)."""
    if not name or not name.strip():
        return "is empty; name the space."
    return None


def check_space_name(name: str) -> None:
    """Raise IntegrityError for a stored space name :func:`space_name_problem` refuses (a :class:`Scope` refuses one
    it is given with an InputError)."""
    problem = space_name_problem(name)
    if problem is not None:
        raise IntegrityError(f"Bad space name {name!r}: {problem}")


def tenant_of(key: str) -> str:
    """The tenant part of a store key: ``T`` for ``T/S``, :data:`LOCAL_TENANT` for a plain name."""
    head, sep, _ = key.partition("/")
    return head if sep else LOCAL_TENANT


@dataclass(frozen=True, slots=True)
class Scope:
    """Tenant ``tenant``'s space ``space``: the first argument of every store call that reads or writes a space.

    ``str()`` is the space's name alone, so a message that shows a scope names no tenant; errors carry the two as
    fields (:attr:`fields`) and front ends render them for their reader (:meth:`tmem.errors.TmemError.shown_to`).
    """

    tenant: str
    space: str

    def __post_init__(self) -> None:
        problem = space_name_problem(self.key)
        if problem is not None:
            raise InputError("Bad space name {name!r}: {problem}", name=self.key, problem=problem)
        if tenant_of(self.key) != self.tenant:
            raise InputError(
                f"Bad scope: space {self.space!r} of tenant {self.tenant!r} would be stored as another tenant's "
                "(a tenant name has no '/', nor does the first part of a local space name); use Scope.local(name) "
                "for a name as a local caller writes it."
            )

    @classmethod
    def local(cls, name: str) -> Scope:
        """The scope a local caller (the library, the CLI) means by ``name``: a plain name is the local tenant's
        space; an operator's ``T/S`` is tenant T's space S, as the service stores it."""
        tenant = tenant_of(name)
        return cls(tenant, name[len(tenant) + 1 :] if tenant else name)

    @property
    def key(self) -> str:
        """The store's ``space`` column value: ``T/S``, or ``S`` for the local tenant."""
        return f"{self.tenant}/{self.space}" if self.tenant else self.space

    @property
    def fields(self) -> dict[str, object]:
        """The error fields of this scope: ``TmemError("... {space!r} ...", **scope.fields)``."""
        return {"tenant": self.tenant, "space": self.space}

    def __str__(self) -> str:
        return self.space


SpaceRef = str | Scope  # a space as the public API takes it: a name (read by Scope.local) or a Scope


def as_scope(space: SpaceRef) -> Scope:
    """The scope of a space as the public API takes it: a Scope as given, a name as :meth:`Scope.local` reads it."""
    return space if isinstance(space, Scope) else Scope.local(space)
