"""The viewer's routes: server-rendered pages over one :class:`~tmem.viewer.scope.ViewerScope` per request.

Hosts include :func:`create_router` under a prefix (``/ui``); ``tmem ui`` serves :func:`create_local_app`. Pages are
plain HTML forms and links (no script), styled by one stylesheet shipped in the package; every response carries a
Content-Security-Policy that allows nothing from elsewhere.
"""

import hashlib
import hmac
import logging
import secrets
import threading
from collections.abc import Callable, Coroutine
from datetime import date, datetime
from importlib import resources
from typing import Annotated, Any
from urllib.parse import quote, unquote

import jinja2
from fastapi import APIRouter, Depends, FastAPI, Form, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from pydantic import AfterValidator
from starlette.datastructures import URL
from starlette.middleware.trustedhost import TrustedHostMiddleware

from tmem.errors import ConfigError, InputError, NotFoundError, StoreError, TmemError, public_message
from tmem.llm.cost import CostReport
from tmem.memory import Memory
from tmem.retrieve.config import PRESETS, SWITCHES
from tmem.util.dates import format_day
from tmem.viewer import edits, pages
from tmem.viewer.recall import SWITCH_LABELS, SearchForm, example_query, recall
from tmem.viewer.scope import ScopeResolver, ViewerScope

log = logging.getLogger("tmem.viewer")

COOKIE = "tmem_viewer_key"
VISIT_COOKIE = "tmem_viewer_visit"  # a visitor's pre-session cookie (anti-forgery tokens before a key is given)
PREFIX = "/ui"
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
STATIC = {"viewer.css": "text/css", "favicon.svg": "image/svg+xml"}
ITEMS_PER_PAGE = 40
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


class LoginNeeded(Exception):
    """Raised by the scope dependency when the request carries no valid key (the viewer then asks for one)."""


def _day(value: date | datetime | None) -> str:
    if value is None:
        return "-"
    return format_day(value.date() if isinstance(value, datetime) else value)


def _when(value: datetime | None) -> str:
    return "-" if value is None else f"{_day(value)}, {value:%H:%M}"


def url(request: Request, name: str, /, **params: str) -> URL:
    """``request.url_for`` with every path parameter percent-encoded (space names and ids may hold any character).

    A space name is encoded twice: the server decodes a path once before routing, so a name holding ``/`` (a local
    space such as ``team/notes``) arrives as one segment, ``team%2Fnotes``, which :data:`SpaceArg` decodes."""
    encoded = {k: quote(str(v), safe="") for k, v in params.items()}
    if "space" in encoded:
        encoded["space"] = quote(encoded["space"], safe="")
    return request.url_for(name, **encoded)


SpaceArg = Annotated[str, AfterValidator(unquote)]  # a space name in a viewer path (see :func:`url`)


@jinja2.pass_context
def _url_for(context: dict[str, Any], name: str, /, **params: str) -> URL:
    request: Request = context["request"]
    return url(request, name, **params)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("tmem.viewer", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["day"] = _day
    env.filters["when"] = _when
    env.filters["num"] = lambda n: f"{n:,}"
    env.filters["score"] = lambda x: f"{x:.4f}"
    env.filters["anchor"] = lambda s: "t-" + quote(str(s), safe="")
    env.globals["family_labels"] = pages.FAMILY_LABELS
    env.globals["url_for"] = _url_for  # before Jinja2Templates, whose own url_for does not encode parameters
    return env


def request_key(request: Request) -> str | None:
    """The API key a request carries: ``Authorization: Bearer KEY``, else the viewer's cookie."""
    auth = request.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return request.cookies.get(COOKIE) or None


def create_router(resolve: ScopeResolver, *, key_login: bool = False, secret: bytes | None = None) -> APIRouter:
    """The viewer's pages. ``resolve`` maps the request's key to the scope it may see (None: ask for a key, when
    ``key_login``, else refuse); ``secret`` signs the forms' anti-forgery tokens (random per process by default)."""
    templates = Jinja2Templates(env=_environment())
    signing = secret or secrets.token_bytes(32)
    edit_lock = threading.Lock()
    static = {file: resources.files("tmem.viewer").joinpath("static", file).read_bytes() for file in STATIC}

    def visitor(request: Request) -> str:
        """What a form's anti-forgery token is bound to: the request's key, else the visitor's own pre-session cookie
        (random, set with the first page a visitor without a key gets), so no two visitors share a token."""
        key = request_key(request)
        if key:
            return "key:" + key
        nonce = request.cookies.get(VISIT_COOKIE) or getattr(request.state, "visit", None)
        if nonce is None:
            nonce = request.state.visit = secrets.token_urlsafe(24)
        return "visit:" + nonce

    def csrf_token(request: Request) -> str:
        return hmac.new(signing, visitor(request).encode(), hashlib.sha256).hexdigest()[:32]

    def check_csrf(request: Request, token: str) -> None:
        keyless_without_cookie = not request_key(request) and not request.cookies.get(VISIT_COOKIE)
        if keyless_without_cookie or not hmac.compare_digest(token, csrf_token(request)):
            raise InputError("This form is out of date or came from another site; reload the page and submit again.")

    def render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        context.setdefault("space", None)
        context.setdefault("tab", None)
        base = {"key_login": key_login, "csrf": csrf_token(request), "tenant": None, **context}
        base["logged_in"] = request_key(request) is not None  # "Log out" only once a key was given
        response = templates.TemplateResponse(request, name, base, status_code=status_code)
        visit = getattr(request.state, "visit", None)
        if visit is not None:  # a new visitor without a key: its pre-session cookie, bound to its forms' tokens
            response.set_cookie(
                VISIT_COOKIE,
                visit,
                httponly=True,
                samesite="strict",
                secure=request.url.scheme == "https",
                path=request.url_for("viewer.spaces").path,
            )
        return response

    def error_page(request: Request, exc: BaseException, status: int) -> HTMLResponse:
        scope: ViewerScope | None = getattr(request.state, "viewer_scope", None)
        message = str(exc)
        if scope is not None and scope.tenant is not None and isinstance(exc, TmemError):  # a served tenant
            message = public_message(exc, scope.tenant)  # rendered from the error's fields for the tenant
            if isinstance(exc, StoreError):
                log.error("%s on %s: %s", type(exc).__name__, request.url.path, exc)
        return render(request, "error.html", status, message=message, status=status)

    class ViewerRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()

            async def guarded(request: Request) -> Response:
                try:
                    response = await handler(request)
                except LoginNeeded:
                    if not key_login:
                        return error_page(request, ConfigError("This viewer needs an API key it was not given."), 401)
                    target = str(
                        request.url_for("viewer.login").include_query_params(next=quote(request.url.path, safe="/"))
                    )
                    return RedirectResponse(target, status_code=303)
                except NotFoundError as exc:
                    response = error_page(request, exc, 404)
                except (InputError, ConfigError) as exc:
                    response = error_page(request, exc, 400)
                except TmemError as exc:
                    response = error_page(request, exc, 500)
                response.headers.setdefault("Content-Security-Policy", CSP)
                response.headers.setdefault("X-Content-Type-Options", "nosniff")
                response.headers.setdefault("Referrer-Policy", "no-referrer")
                return response

            return guarded

    router = APIRouter(route_class=ViewerRoute, include_in_schema=False)

    def get_scope(request: Request) -> ViewerScope:
        scope = resolve(request_key(request))
        if scope is None:
            raise LoginNeeded
        request.state.viewer_scope = scope
        return scope

    Scope = Annotated[ViewerScope, Depends(get_scope)]

    @router.get("/static/{file}", name="viewer.static")
    def static_file(file: str) -> Response:
        if file not in static:
            raise NotFoundError(f"No static file {file!r}.")
        return Response(static[file], media_type=STATIC[file], headers={"Cache-Control": "max-age=3600"})

    @router.get("/", name="viewer.spaces")
    def spaces_page(request: Request, scope: Scope) -> HTMLResponse:
        spaces = scope.spaces()
        costs = {s.name: scope.memory.cost(scope.key(s.name)).total for s in spaces}
        return render(request, "spaces.html", spaces=spaces, costs=costs, tenant=scope.tenant)

    @router.get("/login", name="viewer.login")
    def login_page(request: Request, next: str = "") -> HTMLResponse:
        if not key_login:
            raise NotFoundError("This viewer needs no key.")
        return render(request, "login.html", next=_safe_next(request, next), failed=False)

    @router.post("/login", name="viewer.login_post")
    def login_post(
        request: Request,
        key: Annotated[str, Form()],
        csrf: Annotated[str, Form()] = "",
        next: Annotated[str, Form()] = "",
    ) -> Response:
        if not key_login:
            raise NotFoundError("This viewer needs no key.")
        check_csrf(request, csrf)
        key = key.strip()
        if not key or resolve(key) is None:
            return render(request, "login.html", 401, next=_safe_next(request, next), failed=True)
        response = RedirectResponse(_safe_next(request, next), status_code=303)
        response.set_cookie(
            COOKIE,
            key,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=request.url_for("viewer.spaces").path,
        )
        return response

    @router.post("/logout", name="viewer.logout")
    def logout(request: Request, csrf: Annotated[str, Form()] = "") -> Response:
        check_csrf(request, csrf)
        response = RedirectResponse(str(request.url_for("viewer.login")), status_code=303)
        response.delete_cookie(COOKIE, path=request.url_for("viewer.spaces").path)
        return response

    def space_page(request: Request, scope: ViewerScope, space: str, name: str, tab: str, **context: Any) -> Response:
        summary = scope.summary(space)
        return render(request, name, space=summary, tab=tab, tenant=scope.tenant, **context)

    @router.get("/s/{space}", name="viewer.space")
    def space_overview(request: Request, scope: Scope, space: SpaceArg) -> Response:
        key = scope.key(space)
        records = pages.Records(scope.memory.export(key))
        cost: CostReport = scope.memory.cost(key)
        return space_page(
            request,
            scope,
            space,
            "space.html",
            "overview",
            sessions=pages.sessions(records),
            counts=pages.counts(records),
            trigger_counts=pages.trigger_counts(records),
            built_turns=pages.built_turns(records),
            build_state=records.export.build_state,
            build_records=pages.build_records(records.export.build_state),
            cost=cost,
            jobs=scope.build_jobs(space),
        )

    @router.get("/s/{space}/timeline", name="viewer.timeline")
    def timeline_page(request: Request, scope: Scope, space: SpaceArg) -> Response:
        records = pages.Records(scope.memory.export(scope.key(space)))
        return space_page(
            request,
            scope,
            space,
            "timeline.html",
            "timeline",
            days=pages.timeline(records),
            unbuilt=records.unbuilt_turns(),
        )

    @router.get("/s/{space}/topics", name="viewer.topics")
    def topics_page(request: Request, scope: Scope, space: SpaceArg) -> Response:
        records = pages.Records(scope.memory.export(scope.key(space)))
        return space_page(request, scope, space, "topics.html", "topics", topics=pages.topics(records))

    @router.get("/s/{space}/items", name="viewer.items")
    def items_page(
        request: Request,
        scope: Scope,
        space: SpaceArg,
        q: str = "",
        kind: str = "",
        speaker: str = "",
        family: str = "",
        live: str = "",
        page: Annotated[int, Query(ge=1)] = 1,
        done: str = "",
    ) -> Response:
        records = pages.Records(scope.memory.export(scope.key(space)))
        flt = pages.ItemFilter(q=q.strip(), kind=kind, speaker=speaker, family=family, superseded=not live)
        found = pages.items(records, flt)
        pager = pages.Pager.of(len(found), page, ITEMS_PER_PAGE)
        params = {
            k: v for k, v in {"q": q, "kind": kind, "speaker": speaker, "family": family, "live": live}.items() if v
        }
        links = {
            n: str(url(request, "viewer.items", space=space).include_query_params(**params, page=n))
            for n in pager.numbers()
        }
        return space_page(
            request,
            scope,
            space,
            "items.html",
            "items",
            items=found[pager.start : pager.stop],
            matched=len(found),
            total=len(records.export.items),
            flt=flt,
            pager=pager,
            page_links=links,
            speakers=pages.speakers(records),
            done=edits.DONE.get(done),
        )

    @router.get("/s/{space}/items/{item_id}", name="viewer.item")
    def item_page(request: Request, scope: Scope, space: SpaceArg, item_id: str, done: str = "") -> Response:
        key = scope.key(space)
        records = pages.Records(scope.memory.export(key))
        item = records.item.get(item_id)
        if item is None:
            raise NotFoundError(f"No item {item_id!r} in space {space!r}; it may have been deleted or forgotten.")
        return space_page(
            request,
            scope,
            space,
            "item.html",
            "items",
            view=records.item_view(item),
            history=edits.history(scope.memory, key, item_id),
            edits_available=edits.AVAILABLE,
            edits_note=edits.NOTE,
            max_text=edits.MAX_TEXT,
            done=edits.DONE.get(done),
        )

    @router.post("/s/{space}/items/{item_id}/{action}", name="viewer.edit")
    def edit_item(
        request: Request,
        scope: Scope,
        space: SpaceArg,
        item_id: str,
        action: str,
        csrf: Annotated[str, Form()] = "",
        text: Annotated[str, Form()] = "",
        confirm: Annotated[str, Form()] = "",
    ) -> Response:
        check_csrf(request, csrf)
        if action not in edits.ACTIONS:
            raise NotFoundError(f"No edit {action!r}; use one of {', '.join(edits.ACTIONS)}.")
        key = scope.key(space)
        if action in edits.CONFIRMED and confirm != "yes":  # erasing: show what goes, and ask once
            records = pages.Records(scope.memory.export(key))
            item = records.item.get(item_id)
            if item is None:
                raise NotFoundError(f"No item {item_id!r} in space {space!r}; it may have been deleted or forgotten.")
            erased = edits.preview(records, item, action)
            return space_page(request, scope, space, "confirm.html", "items", action=action, erased=erased)
        with edit_lock:  # one edit at a time: Memory runs update_item on its own event loop
            done, kept = edits.apply(scope.memory, key, item_id, action, text)
        target = (
            url(request, "viewer.item", space=space, item_id=item_id)
            if kept
            else url(request, "viewer.items", space=space)
        )
        return RedirectResponse(str(target.include_query_params(done=done)), status_code=303)

    @router.get("/s/{space}/persona", name="viewer.persona")
    def persona_page(request: Request, scope: Scope, space: SpaceArg) -> Response:
        records = pages.Records(scope.memory.export(scope.key(space)))
        return space_page(request, scope, space, "persona.html", "persona", personas=pages.personas(records))

    @router.get("/s/{space}/search", name="viewer.search")
    def search_page(
        request: Request,
        scope: Scope,
        space: SpaceArg,
        q: str = "",
        preset: str = "",
        without: Annotated[list[str] | None, Query()] = None,
        max_tokens: str = "",
        layout: str = "",
        order: str = "",
    ) -> Response:
        key = scope.key(space)
        default = scope.memory.settings.search_preset
        chosen = default if default in PRESETS else "auto"
        form = SearchForm.parse(q, preset, without or [], max_tokens, chosen, layout, order=order)
        state = scope.summary(space).build_state
        built, searchable = state not in ("empty", "not built"), state != "empty"  # turns are searchable unbuilt
        found = recall(scope.memory, key, form) if form.query and searchable else None
        records = pages.Records(scope.memory.export(key)) if found else None
        return space_page(
            request,
            scope,
            space,
            "search.html",
            "search",
            form=form,
            found=found,
            records=records,
            presets=list(PRESETS),
            switches=SWITCHES,
            switch_labels=SWITCH_LABELS,
            built=built,
            searchable=searchable,
            placeholder=example_query(scope.memory.store.get_space(key).speakers),
        )

    return router


def _safe_next(request: Request, target: str) -> str:
    """A same-site path to go back to after logging in (anything else goes to the space list)."""
    home = request.url_for("viewer.spaces").path
    if target.startswith(home) and not target.startswith("//") and "\\" not in target:
        return target
    return home


def create_local_app(memory: Memory, *, allowed_hosts: tuple[str, ...] = LOCAL_HOSTS) -> FastAPI:
    """``tmem ui``: the viewer over one local memory, no key, answering only to loopback host names (so that a web
    page elsewhere cannot reach it through DNS rebinding). Forms still carry anti-forgery tokens."""
    scope = ViewerScope(memory=memory)
    app = FastAPI(title="tmem viewer", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    app.include_router(create_router(lambda _key: scope), prefix=PREFIX)

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse(PREFIX + "/", status_code=307)

    return app
