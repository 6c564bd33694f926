"""``Topology``: the GPUs, NICs and links of one host (or a multi-host NVLink domain), with lookups,
findings and the JSON round trip under ``gputopo.topology/1``."""

from __future__ import annotations

import copy
import dataclasses
import itertools
from dataclasses import dataclass, field
import operator
import types
import typing
from typing import Any, Callable, Iterator

from gputopo.model.fabric import Fabric
from gputopo.model.from_json import build, shown
from gputopo.model.from_json_kinds import build_kinds
from gputopo.model.json_text import LARGE_DOCUMENT_VALUES, gc_paused, strict_json_parts
from gputopo.model.link_rows import link_rows
from gputopo.model.link_table import KIND_FIELDS, LinkTable
from gputopo.model.observed import CollectiveRun, NcclView, NvLinkState
from gputopo.model.parts import Disagreement, Finding, Gpu, Link, Nic, NicLink
from gputopo.model.reading_notes import ReadingNote, upgrade_legacy
from gputopo.model.tf_view import TfView
from gputopo.model.words import SCHEMA, SEVERITIES, is_known_link_type
from gputopo.notation import check_utc_time


@dataclass
class Topology:
    """GPUs, NICs and the links between them on one host (or several, with ``Gpu.host``)."""

    gpus: list[Gpu] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    nics: list[Nic] = field(default_factory=list)
    nic_links: list[NicLink] = field(default_factory=list)
    diagnostics: list[Finding] = field(default_factory=list)
    # What the readers noticed while reading (a repaired paste, NVML queries that failed): facts that
    # ``gputopo.analysis`` words into findings (``gputopo.model.reading_notes``).
    reading_notes: list[ReadingNote] = field(default_factory=list)
    source: str = "unknown"  # "nvml", "nvidia-smi", "tf-log", "snapshot", "reference"
    source_detail: str | None = None  # file path, machine name, ...
    label: str | None = None  # human title, e.g. "DGX-1 (8x V100 SXM2) — reference machine"
    is_reference: bool = False  # built from public facts, not measured on this host
    host: str | None = None
    # When the live state (memory in use, utilisation, compute processes) was read: UTC, ISO 8601
    # (``2025-06-01T10:00:00Z``); None where not recorded (older snapshots load without it).
    captured_at: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    nvml_version: str | None = None
    socket_interconnect: str | None = None  # e.g. "UPI", "QPI", "Infinity Fabric", "X-Bus"
    # NUMA distances as the kernel reports them: {"0": {"0": 10, "1": 32}, ...}; None when unknown.
    numa_distances: dict[str, dict[str, int]] | None = None
    tf: TfView | None = None
    # How the machine is built where the source reads its tree (sysfs: the live probe, a gathered
    # archive): containment and the links outside PCIe (``gputopo.model.fabric``); None elsewhere.
    fabric: Fabric | None = None
    # Where several sources of this host were merged: the facts they disagree on, and which GPU
    # join was assumed (``gputopo.sources.merge``); findings about them come from analysis.
    disagreements: list[Disagreement] = field(default_factory=list)
    # How this source numbers its GPUs where that is not its kind's rule: "nvml" (nvidia-smi's
    # numbers, PCI bus order), "cuda" (a CUDA program's, CUDA_DEVICE_ORDER); None: as its kind does
    # (NVML, nvidia-smi and snapshots number like NVML; other tools' outputs number the CUDA way).
    gpu_numbering: str | None = None
    # What other tools observed (optional; older snapshots load without them): NVLink states per link,
    # NCCL's log, nccl-tests tables.
    nvlinks: list[NvLinkState] = field(default_factory=list)
    nccl: NcclView | None = None
    collectives: list[CollectiveRun] = field(default_factory=list)
    schema: str = SCHEMA

    # --- lookups -------------------------------------------------------------------------------

    @property
    def gpu_indices(self) -> list[int]:
        return [g.index for g in self.gpus]

    def gpu(self, index: int) -> Gpu:
        """The GPU numbered ``index`` (a dict lookup: see ``_index``). A miss looks again in the
        list itself (GPUs are few; a GPU replaced in place by another number is found)."""
        cached = self.__dict__.get("_indexes", {}).get("gpus")
        gpus = self.gpus
        if cached is not None and cached[0] is gpus and cached[1] == len(gpus):
            position = cached[2].get(index)
        else:
            position = self._index("gpus", gpus, _gpu_key).get(index)
        if position is not None:
            found = self.gpus[position]
            if found.index == index:
                return found
            self._indexes.clear()  # an item was replaced in place: build again
            return self.gpu(index)
        for found in gpus:
            if found.index == index:
                self._indexes.clear()
                return found
        raise KeyError(f"no GPU {index}")

    def link(self, a: int, b: int) -> Link:
        """The link between GPUs ``a`` and ``b`` in either order (a dict lookup: see ``_index``).
        A miss trusts the index (pair loops over sparse topologies miss often): a link replaced in
        place by one of another pair, in a list of the same length, is not found until the list
        changes length or is replaced."""
        if a == b:
            raise KeyError(f"GPU {a} has no link to itself")
        lo, hi = (a, b) if a < b else (b, a)
        position = self._index("links", self.links, _link_key).get((lo, hi))
        if position is not None:
            found = self.links[position]
            if found.a == lo and found.b == hi:
                return found
            self._indexes.clear()
            return self.link(a, b)
        raise KeyError(f"no link between GPU {a} and GPU {b}")

    def _index(self, name: str, items: list[Any], key: Callable[[Any], Any]) -> dict[Any, int]:
        """``{key(item): position}`` for ``items`` (``self.gpus`` or ``self.links``), built on first
        use and built again when the list is another object or has another length (code appends to
        ``links`` and ``gpus`` directly). A hit is checked against the item it points at, so an item
        replaced in place is noticed too. The first of duplicate keys wins, as a scan would."""
        indexes: dict[str, tuple[list[Any], int, dict[Any, int]]] = self._indexes
        cached = indexes.get(name)
        if cached is not None and cached[0] is items and cached[1] == len(items):
            return cached[2]
        # (in C: each key written last to first, so the first of duplicates is the one kept)
        positions = dict(zip(reversed(list(map(key, items))), range(len(items) - 1, -1, -1)))
        indexes[name] = (items, len(items), positions)
        return positions

    @property
    def _indexes(self) -> dict[str, Any]:
        return self.__dict__.setdefault("_indexes", {})

    def cached(self, name: str, compute: Callable[[Topology], Any]) -> Any:
        """``compute(self)``, computed once and kept while ``gpus``, ``links`` and ``nic_links`` are
        the same lists of the same lengths: facts about the whole topology (is it a virtual
        machine's flat view?) that per-pair functions ask for once per pair."""
        gpus, links, nic_links = self.gpus, self.links, self.nic_links
        key = (len(gpus), len(links), len(nic_links))
        memo: dict[str, tuple[Any, ...]] = self.__dict__.setdefault("_memo", {})
        entry = memo.get(name)
        if entry is not None and entry[0] == key and entry[1] is gpus and entry[2] is links and entry[3] is nic_links:
            return entry[4]
        value = compute(self)
        memo[name] = (key, gpus, links, nic_links, value)
        return value

    def has_link(self, a: int, b: int) -> bool:
        try:
            self.link(a, b)
        except KeyError:
            return False
        return True

    def link_map(self) -> dict[tuple[int, int], Link]:
        """``{(a, b): link}`` with both orders as keys, for fast repeated lookups. Built once and
        shared while ``links`` is the same list of the same length (``cached``): read it, never
        change it."""
        return self.cached("link_map", _link_map)

    def link_table(self) -> LinkTable:
        """The links as columns, each with its kind (``model.link_table``): built once and shared
        while ``links`` is the same list of the same length (``cached``): read it, never change it.
        Like every fact kept about the topology, it holds while the links' words are not changed in
        place (sources change them while reading, before anything is asked; measurements and
        health, which doctor and bench-p2p add later, are no part of a kind)."""
        return self.cached("link_table", _link_table)

    def numa_distance(self, a: int, b: int) -> int | None:
        """The kernel's distance from NUMA node ``a`` to ``b`` (10 = local), None where not known."""
        row = (self.numa_distances or {}).get(str(a)) or {}
        return row.get(str(b))

    def pairs(self) -> Iterator[tuple[int, int]]:
        idx = self.gpu_indices
        for i, a in enumerate(idx):
            for b in idx[i + 1 :]:
                yield a, b

    def add_finding(self, finding: Finding) -> None:
        """Add a finding unless one with the same code and GPUs is already there."""
        key = _finding_key(finding)
        position = self._index("findings", self.diagnostics, _finding_key).get(key)
        if position is not None:
            if _finding_key(self.diagnostics[position]) == key:
                return
            if any(_finding_key(existing) == key for existing in self.diagnostics):  # changed in place
                return
        self.diagnostics.append(finding)

    def __deepcopy__(self, memo: dict[int, Any]) -> Topology:
        """A deep copy of the data without what is cached about it (``_indexes``, ``_memo``): a copy
        is made to be changed (``sources.merge``), and facts kept about the original would not hold."""
        copied = object.__new__(type(self))
        memo[id(self)] = copied
        copied.__dict__.update({name: copy.deepcopy(value, memo) for name, value in self.__dict__.items()
                                if name not in ("_indexes", "_memo")})
        return copied

    # --- JSON ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return self._data(self.links)

    def _data(self, links: Any) -> dict[str, Any]:
        """``to_dict`` with ``links`` in the place of the links' dicts."""
        with gc_paused():  # plain values make no cycles (see json_text.gc_paused)
            data = {f.name: _plain(getattr(self, f.name)) if f.name != "links" else None for f in dataclasses.fields(self)}
            data["links"] = _plain(links) if links is self.links else links
        # Put the schema and provenance first for people reading the JSON. The findings are
        # ``findings``, as in every other document; ``diagnostics``, their older name, is written
        # alongside (deprecated: docs/json.md) for readers made before.
        ordered = {"schema": data.pop("schema"), "source": data.pop("source")}
        for key, value in data.items():
            if key == "diagnostics":
                ordered["findings"] = value
            ordered[key] = value
        return ordered

    def to_json_text(self, indent: int = 2) -> str:
        """``strict_json_text(self.to_dict(), indent)``, the same text: a large domain's links are
        written by ``link_rows`` (once per class of equal links), not built as dicts and encoded."""
        return "".join(self.json_parts(indent))

    def json_parts(self, indent: int = 2, extra: dict[str, Any] | None = None) -> Iterator[str]:
        """``to_json_text`` in parts, made as they are asked for: a 576-GPU domain's text (35 MB)
        is written without being held whole. ``extra``: members written after the topology's own
        (``scan --json``'s ``link_figures``); a snapshot reader ignores them."""
        if len(self.links) * _VALUES_PER_LINK > LARGE_DOCUMENT_VALUES:  # large whatever else it holds
            with gc_paused():
                try:
                    table: LinkTable | None = self.link_table()
                except TypeError:  # an unhashable word: written as the dicts are
                    table = None
                rows = link_rows(self.links, plain_data, table)
            if rows is not None:
                return strict_json_parts({**self._data(rows), **(extra or {})}, indent, large=True)
        return strict_json_parts({**self.to_dict(), **(extra or {})}, indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any], take: bool = False) -> Topology:
        """Build a Topology from ``to_dict`` output; raises ``ValueError`` on a wrong shape. ``take``:
        the caller will not use ``data`` again (``json.loads``'s result): its link dicts become the
        links' attributes instead of being copied (``from_json.build``), and the topology, new and
        nobody else's, keeps the ``link_table`` its checks were made on."""
        if not isinstance(data, dict):
            raise ValueError("a topology snapshot must be a JSON object")
        schema = data.get("schema")
        if schema != SCHEMA:
            raise ValueError(f"schema: unsupported snapshot schema {shown(schema)} (expected {SCHEMA!r})")
        if "diagnostics" not in data and "findings" in data:  # written without the deprecated alias
            data = {**data, "diagnostics": data["findings"]}
        links = data.get("links")
        kinds = build_kinds(Link, links, KIND_FIELDS, take) if take and type(links) is list and len(links) > 16 else None
        try:
            topo = build(cls, upgrade_legacy(data if kinds is None else {**data, "links": []}), take=take)
        except (TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"malformed topology snapshot: {exc}") from None
        if not take:
            topo.validate()
            return topo
        if kinds is not None:  # the links checked once per kind: their table is made of those kinds
            topo.links = kinds.objects
            table: LinkTable | None = LinkTable(kinds.columns["a"], kinds.columns["b"], kinds.kind_of, kinds.kinds,
                                                [kinds.objects[position] for position in kinds.first])
        else:
            try:
                table = LinkTable.of(topo.links)
            except TypeError:  # an unhashable word: validate names it
                table = None
        topo.validate(table)
        if table is not None:
            topo.cached("link_table", lambda _: table)
        return topo

    def validate(self, table: LinkTable | None = None) -> None:
        """Check internal consistency; raises ``ValueError`` naming the first field that is wrong
        (``gpus[3].index: duplicate GPU index 2``). A check of whole columns first (a 576-GPU
        domain: 165,600 links: on ``table``, the links' ``LinkTable``, where the caller has it); only
        where it fails does the loop below look for what to name."""
        if self.captured_at is not None:
            check_utc_time(self.captured_at, "captured_at")
        if _consistent(self, table):
            return
        known: set[int] = set()
        for k, gpu in enumerate(self.gpus):
            if gpu.index < 0:
                raise ValueError(f"gpus[{k}].index: GPU indices are not negative, got {gpu.index}")
            if gpu.index in known:
                raise ValueError(f"gpus[{k}].index: duplicate GPU index {gpu.index}")
            known.add(gpu.index)
        seen: set[tuple[int, int]] = set()
        known_types = {"UNKNOWN"}  # each distinct word checked once (a 576-GPU domain: 165,600 links)
        for k, link in enumerate(self.links):
            a, b, word = link.a, link.b, link.type
            if a not in known or b not in known:
                end = "a" if a not in known else "b"
                raise ValueError(f"links[{k}].{end}: GPU {getattr(link, end)} is not in gpus")
            if a >= b:
                raise ValueError(f"links[{k}]: link {a}-{b} must have a < b")
            if (a, b) in seen:
                raise ValueError(f"links[{k}]: link {a}-{b} is listed twice")
            seen.add((a, b))
            if word not in known_types:
                if not is_known_link_type(word):
                    raise ValueError(f"links[{k}].type: unknown link type {word[:40]!r}")
                known_types.add(word)
        for k, finding in enumerate(self.diagnostics):
            if finding.severity not in SEVERITIES:
                raise ValueError(f"diagnostics[{k}].severity: unknown severity {finding.severity[:40]!r} "
                                 f"(finding {finding.code[:40]!r})")


def _consistent(topology: Topology, table: LinkTable | None) -> bool:
    """``validate``'s checks over whole columns: True where all hold (False: look item by item)."""
    try:
        indices = list(map(_GPU_INDEX, topology.gpus))
        known = set(indices)
        if len(known) != len(indices) or (indices and min(indices) < 0):
            return False
        links = topology.links
        ends_a, ends_b = (table.ends_a, table.ends_b) if table is not None else (list(map(_END_A, links)), list(map(_END_B, links)))
        if not (known.issuperset(ends_a) and known.issuperset(ends_b) and all(map(operator.lt, ends_a, ends_b))):
            return False
        if {type(index) for index in known} - {int}:
            return False
        width = max(known, default=0) + 1  # each pair as one number: a * width + b (no tuple per link)
        if len(set(map(operator.add, map(operator.mul, ends_a, itertools.repeat(width)), ends_b))) != len(links):
            return False
        words = {kind[0] for kind in table.kinds} if table is not None else set(map(_LINK_TYPE, links))
        words.discard("UNKNOWN")
        severities = set(map(_SEVERITY, topology.diagnostics))
        return all(map(is_known_link_type, words)) and severities <= set(SEVERITIES)
    except TypeError:  # a value of a wrong type (unhashable, unordered): the loop names it
        return False


_GPU_INDEX = operator.attrgetter("index")
_END_A, _END_B, _LINK_TYPE = operator.attrgetter("a"), operator.attrgetter("b"), operator.attrgetter("type")
_SEVERITY = operator.attrgetter("severity")


# What one link counts for in ``json_text``'s size of a document: its place in the list, and its fields.
_VALUES_PER_LINK = 1 + len(dataclasses.fields(Link))
_SCALARS = frozenset({str, int, float, bool, type(None)})
_GETTERS: dict[type, tuple[tuple[str, ...], Callable[[Any], Any], tuple[str, ...]]] = {}


def plain_data(value: Any) -> Any:
    """``dataclasses.asdict`` for our model's data (dataclasses, lists, tuples, dicts of plain
    values), without its deep copies: a 576-GPU domain's 165,600 links, a 1000-host plan, in a
    fraction of the time. Plain values are shared, not copied (they are immutable)."""
    return _plain(value)


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is list and value and dataclasses.is_dataclass(value[0]) and len(set(map(type, value))) == 1:
        return _plain_objects(value)  # a list of one dataclass (a domain's links): one loop, no calls
    if kind is list:
        return [v if type(v) in _SCALARS else _plain(v) for v in value]
    if kind is tuple:
        return tuple(v if type(v) in _SCALARS else _plain(v) for v in value)
    if kind is dict:
        return {k: v if type(v) in _SCALARS else _plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value):
        return _plain_objects([value])[0]
    return value


def _plain_objects(objects: list[Any]) -> list[dict[str, Any]]:
    """Objects of one dataclass as dicts: its fields read at once (``attrgetter``), only the fields
    that may nest (``Link.measured``, ``Link.health``) looked at one by one."""
    kind = type(objects[0])
    getter = _GETTERS.get(kind)
    if getter is None:
        names = tuple(f.name for f in dataclasses.fields(kind))
        hints = typing.get_type_hints(kind)
        nested = tuple(name for name in names if not _plain_hint(hints[name]))
        getter = _GETTERS[kind] = (names, operator.attrgetter(*names), nested)
    names, get, nested = getter
    single = len(names) == 1
    result = []
    for obj in objects:
        data = dict(zip(names, (get(obj),) if single else get(obj)))
        for name in nested:
            v = data[name]
            if type(v) is list and not v:
                data[name] = []
            elif type(v) not in _SCALARS:
                data[name] = _plain(v)
        result.append(data)
    return result


def _plain_hint(hint: Any) -> bool:
    """Whether a field's type holds only plain values (``int``, ``str | None``...)."""
    args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    return all(arg in _SCALARS for arg in args)


def _link_table(topology: Topology) -> LinkTable:
    return LinkTable.of(topology.links)


def _link_map(topology: Topology) -> dict[tuple[int, int], Link]:
    result: dict[tuple[int, int], Link] = {}
    for link in topology.links:
        result[(link.a, link.b)] = link
        result[(link.b, link.a)] = link
    return result


_gpu_key: Callable[[Gpu], int] = operator.attrgetter("index")
_link_key: Callable[[Link], tuple[int, int]] = operator.attrgetter("a", "b")  # (a, b), made in C


def _finding_key(finding: Finding) -> tuple[str, tuple[int, ...]]:
    return (finding.code, tuple(finding.gpus))
