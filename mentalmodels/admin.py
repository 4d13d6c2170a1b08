"""Django admin for mental models: curation through the services.

- The list shows each model's trigger kind, mode, staleness (the one rule, ``stale_flags``,
  computed once for the page), clocks and the pause flag, with filters and search.
- Create and edit go through ``mental_model_create`` / ``mental_model_update`` (the forms in
  ``mentalmodels.admin_forms`` parse with the API's rules, so a bad cron is a field error); delete
  goes through ``mental_model_delete``. An edit of ``source_query``, ``tags`` or ``trigger``
  therefore bumps a running refresh's fence and queues the follow-up
  (docs/behaviour.md#edits-during-a-running-refresh).
- Actions: refresh, refresh in full, resume after failure (all manual refresh requests, which
  release a parked refresh), clear, and a dry run that renders the preview with a side-by-side
  diff and writes nothing.
- History inline, newest first, and a page with a side-by-side diff between any version and the
  current content, with a button that restores that version (``mental_model_restore``,
  docs/behaviour.md#restore). Proposals a refresh holds for review have their own pages
  (``mentalmodels.review.admin``).
"""

from __future__ import annotations

import difflib
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from hindsight.infra.errors import DomainError
from hindsight.infra.vocabulary import REFRESH_MODES
from mentalmodels import services
from mentalmodels.admin_forms import MentalModelAddForm, MentalModelChangeForm
from mentalmodels.models import PAUSED, HistoryKind, MentalModel, MentalModelHistory
from mentalmodels.refresh.pipeline import refresh_dry_run
from mentalmodels.refresh.records import Preview
from mentalmodels.selectors import ModelSpend, mental_models_spend
from mentalmodels.staleness import stale_flags

# The dry run is synchronous LLM work inside one admin request: keep it bounded.
DRY_RUN_MAX_MODELS = 3


def side_by_side(before: str, after: str, *, before_label: str, after_label: str) -> SafeString:
    """A two-column table of the line diff: unchanged lines on both sides, removed ones on the
    left (``diff_sub``), added ones on the right (``diff_add``), replaced ones paired
    (``diff_chg``). Every line is escaped by ``format_html``."""
    left, right = before.splitlines(), after.splitlines()
    rows: list[SafeString] = []

    def row(kind: str, old: int | None, new: int | None) -> SafeString:
        return format_html(
            '<tr class="{}"><td class="diff_header">{}</td><td class="diff_left">{}</td>'
            '<td class="diff_header">{}</td><td class="diff_right">{}</td></tr>',
            kind,
            "" if old is None else old + 1, "" if old is None else left[old],
            "" if new is None else new + 1, "" if new is None else right[new],
        )

    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows.extend(row("diff_same", i, j) for i, j in zip(range(i1, i2), range(j1, j2),
                                                               strict=True))
            continue
        olds, news = list(range(i1, i2)), list(range(j1, j2))
        for k in range(max(len(olds), len(news))):
            old = olds[k] if k < len(olds) else None
            new = news[k] if k < len(news) else None
            kind = "diff_chg" if old is not None and new is not None else (
                "diff_sub" if old is not None else "diff_add")
            rows.append(row(kind, old, new))
    return format_html(
        '<table class="diff"><thead><tr><th colspan="2">{}</th><th colspan="2">{}</th></tr>'
        "</thead><tbody>{}</tbody></table>",
        before_label, after_label, mark_safe("".join(rows)),  # each row escaped above
    )


def trigger_kind(trigger: dict[str, Any] | None) -> str:
    """manual / after consolidation / cron (a model may have both automatic kinds)."""
    trigger = trigger or {}
    kinds = []
    if trigger.get("refresh_after_consolidation"):
        kinds.append("after consolidation")
    if trigger.get("refresh_cron") or trigger.get("full_refresh_cron"):
        kinds.append("cron")
    return " + ".join(kinds) or "manual"


class _StaleChangeList(ChangeList):
    """Computes the page's staleness flags together (constant queries), like the API list."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        flags = stale_flags(self.result_list)
        spend = mental_models_spend(self.result_list)
        for model in self.result_list:
            model._is_stale = flags[model.uid]
            model._spend = spend[model.uid]


class StaleFilter(admin.SimpleListFilter):
    """Stale or fresh by the one rule: the flags of every model the other filters left, in a
    constant number of queries (``stale_flags`` batches them)."""

    title = "stale"
    parameter_name = "stale"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Stale"), ("no", "Fresh")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[MentalModel]) -> QuerySet[MentalModel]:
        if self.value() not in ("yes", "no"):
            return queryset
        models = list(queryset.only(
            "uid", "bank_id", "tags", "trigger", "last_memory_seen_at"
        ))
        flags = stale_flags(models)
        wanted = self.value() == "yes"
        return queryset.filter(uid__in=[uid for uid, stale in flags.items() if stale == wanted])


class PausedFilter(admin.SimpleListFilter):
    title = "paused after failure"
    parameter_name = "paused"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Paused"), ("no", "Not paused")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[MentalModel]) -> QuerySet[MentalModel]:
        if self.value() == "yes":
            return queryset.filter(PAUSED)
        if self.value() == "no":
            return queryset.exclude(PAUSED)
        return queryset


class ModeFilter(admin.SimpleListFilter):
    title = "mode"
    parameter_name = "mode"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(mode, mode) for mode in REFRESH_MODES]

    def queryset(self, request: HttpRequest, queryset: QuerySet[MentalModel]) -> QuerySet[MentalModel]:
        if self.value() in REFRESH_MODES:
            return queryset.filter(trigger__mode=self.value())
        return queryset


def _unset(key: str) -> Q:
    return Q(**{f"trigger__{key}": None}) | Q(**{f"trigger__{key}__isnull": True})


class TriggerKindFilter(admin.SimpleListFilter):
    title = "trigger kind"
    parameter_name = "trigger_kind"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("manual", "manual"), ("consolidation", "after consolidation"), ("cron", "cron")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[MentalModel]) -> QuerySet[MentalModel]:
        no_cron = _unset("refresh_cron") & _unset("full_refresh_cron")
        after_consolidation = Q(trigger__refresh_after_consolidation=True)
        if self.value() == "manual":
            return queryset.filter(no_cron).exclude(after_consolidation)
        if self.value() == "consolidation":
            return queryset.filter(after_consolidation)
        if self.value() == "cron":
            return queryset.exclude(no_cron)
        return queryset


class HistoryInline(admin.TabularInline):
    """Versions and failures, newest first; each version links to its diff with the current."""

    model = MentalModelHistory
    extra = 0
    can_delete = False
    fields = ("entry", "changed_at", "reason", "operation_id", "detail")
    readonly_fields = fields
    ordering = ("-changed_at", "-id")
    verbose_name = "history entry"
    verbose_name_plural = "history (newest first)"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="kind")
    def entry(self, entry: MentalModelHistory) -> str:
        if entry.kind == HistoryKind.FAILURE:
            return mark_safe('<strong class="history-failure" style="color:#ba2121">failure</strong>')
        return mark_safe('<span class="history-version">version</span>')

    @admin.display(description="detail")
    def detail(self, entry: MentalModelHistory) -> str:
        if entry.kind == HistoryKind.FAILURE:
            return format_html("<code>{}</code>", (entry.exception or "")[:500])
        url = reverse("admin:mentalmodels_mentalmodel_diff", args=[entry.model_id, entry.id])
        size = len(entry.previous_content or "")
        return format_html('<a class="history-diff" href="{}">diff with current</a> '
                           "({} characters before)", url, size)


@admin.register(MentalModel)
class MentalModelAdmin(admin.ModelAdmin):
    list_display = (
        "name", "mental_model_id", "bank", "tag_list", "mode", "trigger_kind", "stale",
        "last_refreshed_at", "last_memory_seen_at", "paused", "last_refresh_tokens",
        "tokens_last_24h",
    )
    list_filter = ("bank", StaleFilter, PausedFilter, ModeFilter, TriggerKindFilter)
    search_fields = ("name", "mental_model_id", "source_query")
    list_select_related = ("bank",)
    ordering = ("bank_id", "mental_model_id")
    inlines = [HistoryInline]
    actions = ["refresh", "refresh_full", "resume", "clear", "dry_run"]
    add_fieldsets = (
        (None, {"fields": ("bank", "mental_model_id", "name", "source_query", "tags",
                           "max_tokens", "trigger")}),
    )
    change_fieldsets = (
        (None, {"fields": ("bank", "mental_model_id", "name", "source_query", "tags",
                           "max_tokens", "trigger")}),
        ("Document", {"fields": ("content",)}),
        ("State", {"fields": ("last_refreshed_at", "last_memory_seen_at", "last_full_refreshed_at",
                              "last_refresh_failed_at", "awaiting_llm_since", "created_at",
                              "updated_at")}),
    )
    _readonly_on_change = (
        "bank", "mental_model_id", "content", "last_refreshed_at", "last_memory_seen_at",
        "last_full_refreshed_at", "last_refresh_failed_at",
        # Set by a refresh that found no LLM configured; cleared when its refresh is queued.
        "awaiting_llm_since", "created_at", "updated_at",
    )

    # --- list --------------------------------------------------------------------------------

    def get_queryset(self, request: HttpRequest) -> QuerySet[MentalModel]:
        return super().get_queryset(request).defer("embedding", "reflect_response", "document")

    def get_changelist(self, request: HttpRequest, **kwargs: object) -> type[ChangeList]:
        return _StaleChangeList

    @admin.display(description="tags")
    def tag_list(self, model: MentalModel) -> str:
        return ", ".join(model.tags)

    @admin.display(description="mode")
    def mode(self, model: MentalModel) -> str:
        return str((model.trigger or {}).get("mode") or "full")

    @admin.display(description="trigger")
    def trigger_kind(self, model: MentalModel) -> str:
        return trigger_kind(model.trigger)

    @admin.display(description="stale")
    def stale(self, model: MentalModel) -> str:
        # A warning, not the boolean column's icon: its green check would read as "all good".
        flag = getattr(model, "_is_stale", None)
        if not (stale_flags([model])[model.uid] if flag is None else flag):
            return "fresh"
        return format_html(
            '<span class="stale-warning" style="color: var(--error-fg); font-weight: bold" '
            'title="{}">⚠ stale</span>',
            "memories in its scope changed after its last refresh")

    def _spend(self, model: MentalModel) -> ModelSpend:
        spend = getattr(model, "_spend", None)
        return mental_models_spend([model])[model.uid] if spend is None else spend

    @admin.display(description="tokens (last refresh)")
    def last_refresh_tokens(self, model: MentalModel) -> str:
        tokens = self._spend(model).last_refresh_tokens
        return "-" if tokens is None else f"{tokens:,}"

    @admin.display(description="tokens (24 h)")
    def tokens_last_24h(self, model: MentalModel) -> str:
        return f"{self._spend(model).tokens_last_24h:,}"

    @admin.display(description="paused", ordering="last_refresh_failed_at")
    def paused(self, model: MentalModel) -> str:
        # Like stale: a paused model needs a person, and the boolean icon's green check for
        # "paused" would read as "all good".
        if not model.paused:
            return "no"
        return format_html(
            '<span class="paused-warning" style="color: var(--error-fg); font-weight: bold" '
            'title="{}">⚠ paused</span>',
            "its last refresh failed for good: automatic refreshes wait for a manual one")

    # --- forms: through the services ---------------------------------------------------------

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.add_fieldsets if obj is None else self.change_fieldsets

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return () if obj is None else self._readonly_on_change

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False,
                 **kwargs: Any) -> type[ModelForm]:
        # No model fields: values reach the row only through the service (admin_forms).
        kwargs["form"] = MentalModelAddForm if obj is None else MentalModelChangeForm
        kwargs["fields"] = ()
        return super().get_form(request, obj, change, **kwargs)

    def save_model(self, request: HttpRequest, obj: MentalModel, form: Any, change: bool) -> None:
        kwargs = form.service_kwargs
        try:
            if change:
                model = services.mental_model_update(**kwargs)
            else:
                model, _operation = services.mental_model_create(**kwargs)
        except DomainError as exc:
            # Found only at write time (an id taken meanwhile, the model deleted meanwhile):
            # the change view's transaction rolls back and the page says why.
            raise _Refused(exc.detail) from exc
        obj.uid = model.uid
        obj.refresh_from_db()

    def changeform_view(self, request: HttpRequest, object_id: str | None = None,
                        form_url: str = "", extra_context: dict[str, Any] | None = None
                        ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except _Refused as exc:
            messages.error(request, f"Not saved: {exc}")
            return HttpResponseRedirect(request.get_full_path())

    def get_inlines(self, request: HttpRequest, obj: Any) -> Any:
        return [] if obj is None else self.inlines  # a new model has no history yet

    def delete_model(self, request: HttpRequest, obj: MentalModel) -> None:
        services.mental_model_delete(bank_id=obj.bank_id, mental_model_id=obj.mental_model_id)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[MentalModel]) -> None:
        for bank_id, mental_model_id in queryset.values_list("bank_id", "mental_model_id"):
            try:
                services.mental_model_delete(bank_id=bank_id, mental_model_id=mental_model_id)
            except DomainError:
                pass  # deleted meanwhile

    # --- actions -----------------------------------------------------------------------------

    def _request_refreshes(self, request: HttpRequest, models: Any, *, mode: str | None,
                           verb: str) -> None:
        queued = 0
        for model in models:
            try:
                services.mental_model_refresh_request(
                    bank_id=model.bank_id, mental_model_id=model.mental_model_id, mode=mode
                )
                queued += 1
            except DomainError as exc:
                messages.warning(request, f"{model.mental_model_id}: {exc.detail}")
        messages.info(request, f"{verb} {queued} refresh(es).")

    @admin.action(description="Refresh the selected mental models (now; releases a parked refresh)")
    def refresh(self, request: HttpRequest, queryset: QuerySet[MentalModel]) -> None:
        self._request_refreshes(request, queryset, mode=None, verb="Queued")

    @admin.action(description="Refresh the selected mental models in full")
    def refresh_full(self, request: HttpRequest, queryset: QuerySet[MentalModel]) -> None:
        self._request_refreshes(request, queryset, mode="full", verb="Queued full")

    @admin.action(description="Resume the selected paused mental models (a manual refresh)")
    def resume(self, request: HttpRequest, queryset: QuerySet[MentalModel]) -> None:
        paused = [m for m in queryset if m.paused]
        skipped = queryset.count() - len(paused)
        if skipped:
            messages.warning(request, f"{skipped} selected model(s) are not paused; left alone.")
        # A manual refresh runs even while paused (docs/behaviour.md#retries-and-the-pause); its
        # success clears the flag.
        self._request_refreshes(request, paused, mode=None, verb="Resumed with")

    @admin.action(description="Clear the selected mental models")
    def clear(self, request: HttpRequest, queryset: QuerySet[MentalModel]) -> None:
        cleared = 0
        for model in queryset:
            try:
                services.mental_model_clear(bank_id=model.bank_id, mental_model_id=model.mental_model_id)
                cleared += 1
            except DomainError as exc:
                messages.warning(request, f"{model.mental_model_id}: {exc.detail}")
        messages.info(request, f"Cleared {cleared} mental model(s).")

    @admin.action(description="Dry-run a refresh of the selected mental models (writes nothing)")
    def dry_run(self, request: HttpRequest, queryset: QuerySet[MentalModel]) -> HttpResponse | None:
        models = list(queryset[: DRY_RUN_MAX_MODELS + 1])
        if len(models) > DRY_RUN_MAX_MODELS:
            messages.error(request, f"A dry run runs the LLM while you wait: select at most "
                                    f"{DRY_RUN_MAX_MODELS} models.")
            return None
        results = []
        for model in models:
            try:
                preview: Preview | None = refresh_dry_run(
                    bank_id=model.bank_id, mental_model_id=model.mental_model_id
                )
                error = None
            except DomainError as exc:
                preview, error = None, exc.detail
            results.append(_dry_run_entry(model, preview, error))
        context = {
            **self.admin_site.each_context(request),
            "title": "Dry run (nothing was written)",
            "opts": self.model._meta,
            "results": results,
        }
        return TemplateResponse(request, "admin/mentalmodels/mentalmodel/dry_run.html", context)

    # --- the diff page -----------------------------------------------------------------------

    def get_urls(self) -> list[Any]:
        return [
            path("<int:uid>/diff/<int:entry_id>/", self.admin_site.admin_view(self.diff_view),
                 name="mentalmodels_mentalmodel_diff"),
            *super().get_urls(),
        ]

    def diff_view(self, request: HttpRequest, uid: int, entry_id: int) -> HttpResponse:
        model = get_object_or_404(MentalModel.objects.defer("embedding"), uid=uid)
        if not self.has_view_permission(request, model):
            raise PermissionDenied
        entry = get_object_or_404(MentalModelHistory, id=entry_id, model_id=uid, kind=HistoryKind.VERSION)
        if request.method == "POST":
            if not self.has_change_permission(request, model):
                raise PermissionDenied
            try:
                services.mental_model_restore(bank_id=model.bank_id,
                                              mental_model_id=model.mental_model_id,
                                              version_id=entry.id)
                messages.success(request, "Restored: the page this version kept is back (the "
                                          "restore is a version too, in the history).")
            except DomainError as exc:
                messages.error(request, f"Refused: {exc}")
            return HttpResponseRedirect(reverse("admin:mentalmodels_mentalmodel_change",
                                                args=[model.uid]))
        versions = MentalModelHistory.objects.filter(model_id=uid, kind=HistoryKind.VERSION).order_by(
            "-changed_at", "-id")
        context = {
            **self.admin_site.each_context(request),
            "title": f"{model.name}: version of {entry.changed_at:%Y-%m-%d %H:%M:%S} vs current",
            "opts": self.model._meta,
            "original": model,
            "entry": entry,
            "versions": versions,
            "diff": side_by_side(
                entry.previous_content or "", model.content or "",
                before_label=f"before the change of {entry.changed_at:%Y-%m-%d %H:%M:%S}",
                after_label="current",
            ),
            "identical": (entry.previous_content or "") == (model.content or ""),
        }
        return TemplateResponse(request, "admin/mentalmodels/mentalmodel/diff.html", context)


class _Refused(Exception):
    """A service refused the admin's write after the form had passed."""


def _dry_run_entry(model: MentalModel, preview: Preview | None, error: str | None) -> dict[str, Any]:
    if preview is None:
        return {"model": model, "error": error}
    return {
        "model": model,
        "outcome": preview.outcome.outcome,
        "would_persist": preview.would_persist,
        "effective_mode": preview.plan.effective_mode,
        "warnings": preview.warnings,
        "content": preview.outcome.content,
        "diff": side_by_side(preview.current_content, preview.outcome.content,
                             before_label="current", after_label="after the refresh"),
    }
