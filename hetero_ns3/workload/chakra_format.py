"""Chakra execution-trace files (MLCommons ET): reading, writing, rank files, comm groups, schema version.

An ET file is one rank's trace: a varint-length-prefixed ``GlobalMetadata`` message followed by
``Node`` messages (``et_def.proto`` of the ``mlc-chakra`` package, imported as ``chakra``; the PyPI
name ``chakra`` is an unrelated package). Messages are framed with the package's own
``protolib.encodeMessage`` / ``decodeMessage``; files may be gzipped. Attribute names and value types
follow the Chakra feeder (``src/feeder/et_feeder_node.cpp``): ``num_ops`` int64, ``tensor_size``
uint64, ``comm_type`` int64 (``CollectiveCommType``), ``comm_size`` int64, ``comm_src`` / ``comm_dst``
/ ``comm_tag`` int32, ``pg_name`` string, ``is_cpu_op`` bool. Readers accept any numeric oneof.

``mlc-chakra`` is an optional dependency (``pip install 'hetero-ns3[chakra]'``); it is imported on
first use only. See docs/chakra.md.
"""

from __future__ import annotations

import glob
import gzip
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from hetero_ns3.errors import ScenarioError

#: Schema version written by :func:`write_trace` (what the package's own generator writes).
WRITE_VERSION = "1.0.0"
#: Major versions of ``GlobalMetadata.version`` we read (the ``et_def.proto`` of mlc-chakra 1.0.0; the
#: 0.0.x traces have the same Node schema). An empty version (PyTorch converter output) is accepted.
SUPPORTED_MAJORS = (0, 1)
#: Name of the comm-group JSON looked for next to the traces (ASTRA-sim ``--comm-group-configuration``).
COMM_GROUP_FILE = "comm_group.json"

_RANK_RE = re.compile(r"(\d+)\.et(\.gz)?$")


def chakra_modules() -> tuple[ModuleType, ModuleType]:
    """``(et_def_pb2, protolib)`` of the installed ``mlc-chakra``; ScenarioError naming the fix if absent."""
    try:
        from chakra.schema.protobuf import et_def_pb2
        from chakra.src.third_party.utils import protolib
    except ImportError as err:
        raise ScenarioError(
            f"Chakra traces need the mlc-chakra package (imported as 'chakra'): {err}; "
            "install it with pip install 'hetero-ns3[chakra]' (the PyPI name 'chakra' is another package)"
        ) from None
    return et_def_pb2, protolib


def check_version(version: str, where: str) -> None:
    """Raise ScenarioError unless ``version`` (``GlobalMetadata.version``) is one we read."""
    if version == "":
        return
    m = re.fullmatch(r"(\d+)(\.\d+)*", version.strip())
    if m is None or int(m.group(1)) not in SUPPORTED_MAJORS:
        majors = " or ".join(f"{v}.x" for v in SUPPORTED_MAJORS)
        raise ScenarioError(
            f"{where}: Chakra schema version {version!r} is not supported; this reader (mlc-chakra 1.0.0's "
            f"et_def.proto) reads versions {majors} (and traces without a version); convert the trace with a "
            "matching chakra release"
        )


def attr_value(node: Any, name: str, default: Any = None) -> Any:
    """Value of attribute ``name`` of a Chakra ``Node`` (first match; any scalar oneof), else ``default``."""
    for a in node.attr:
        if a.name == name:
            field = a.WhichOneof("value")
            return default if field is None else getattr(a, field)
    return default


@dataclass(frozen=True)
class RankTrace:
    """One rank's ET file, decoded."""

    rank: int
    path: Path
    version: str
    nodes: tuple[Any, ...]
    """``ChakraProtoMsg.Node`` messages in file order."""


def _open(path: Path) -> Any:
    with open(path, "rb") as fh:
        magic = fh.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")


def read_trace(path: Path, rank: int) -> RankTrace:
    """Decode one ET file (schema version checked)."""
    pb, protolib = chakra_modules()
    from google.protobuf.message import DecodeError

    nodes: list[Any] = []
    try:
        with _open(path) as fh:
            meta = pb.GlobalMetadata()
            if not protolib.decodeMessage(fh, meta):
                raise ScenarioError(f"{path}: empty or not a Chakra ET file (no GlobalMetadata message)")
            check_version(meta.version, str(path))
            while True:
                node = pb.Node()
                if not protolib.decodeMessage(fh, node):
                    break
                nodes.append(node)
    except (DecodeError, OSError, EOFError) as err:
        raise ScenarioError(f"{path}: not a readable Chakra ET file ({err})") from None
    return RankTrace(rank, path, meta.version, tuple(nodes))


def write_trace(path: Path, nodes: Iterable[Any], version: str = WRITE_VERSION) -> None:
    """Write one rank's ET file: the metadata message, then ``nodes`` (``Node`` messages) in order."""
    pb, protolib = chakra_modules()
    with open(path, "wb") as fh:
        protolib.encodeMessage(fh, pb.GlobalMetadata(version=version))
        for node in nodes:
            protolib.encodeMessage(fh, node)


def find_rank_files(spec: str, base_dir: Path, where: str = "workload.chakra") -> list[Path]:
    """The per-rank ET files named by ``spec`` (a directory or a glob), indexed by rank.

    The rank of a file is the number before ``.et`` (``trace.3.et`` is rank 3; ``.et.gz`` too); the ranks
    must be 0..N-1, each once.
    """
    p = Path(spec).expanduser()
    if not p.is_absolute():
        p = base_dir / p
    if p.is_dir():
        files = sorted(p.glob("*.et")) + sorted(p.glob("*.et.gz"))
        what = f"directory {str(p)!r}"
    else:
        files = sorted(Path(f) for f in glob.glob(str(p)))
        what = f"glob {str(p)!r}"
    if not files:
        raise ScenarioError(
            f"{where} ({spec!r}): {what} matches no Chakra ET files; name a directory of NAME.<rank>.et files "
            "or a glob such as 'traces/*.et'"
        )
    by_rank: dict[int, Path] = {}
    for f in files:
        m = _RANK_RE.search(f.name)
        if m is None:
            raise ScenarioError(f"{where}: {f} is not named NAME.<rank>.et; rename it so its rank can be read")
        r = int(m.group(1))
        if r in by_rank:
            raise ScenarioError(f"{where}: rank {r} has two files ({by_rank[r].name}, {f.name}); keep one")
        by_rank[r] = f
    missing = sorted(set(range(max(by_rank) + 1)) - set(by_rank))
    if missing:
        raise ScenarioError(
            f"{where} ({spec!r}): the file of rank {missing[0]} is missing (found ranks {sorted(by_rank)[:16]}); "
            "ranks must be 0..N-1, one file each"
        )
    return [by_rank[r] for r in range(len(by_rank))]


def load_comm_groups(path: Path, n_ranks: int, where: str = "workload.comm_groups") -> dict[str, tuple[int, ...]]:
    """A comm-group JSON (``{"pg_name": [rank, ...]}``) checked against ``n_ranks``."""
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise ScenarioError(f"{where} ({str(path)!r}) does not exist; name the comm-group JSON") from None
    except (OSError, json.JSONDecodeError) as err:
        raise ScenarioError(f"{where} ({str(path)!r}): not valid JSON ({err})") from None
    if not isinstance(raw, Mapping):
        raise ScenarioError(f'{where} ({str(path)!r}) must map a pg_name to a list of ranks, e.g. {{"0": [0, 1]}}')
    out: dict[str, tuple[int, ...]] = {}
    for name, ranks in raw.items():
        if not (isinstance(ranks, Sequence) and ranks and all(isinstance(r, int) for r in ranks)):
            raise ScenarioError(f"{where}: group {name!r} ({ranks!r}) must be a non-empty list of ranks")
        bad = [r for r in ranks if not 0 <= r < n_ranks]
        if bad or len(set(ranks)) != len(ranks):
            raise ScenarioError(
                f"{where}: group {name!r} ({list(ranks)}) names rank {bad[0] if bad else 'twice'}; "
                f"ranks are 0..{n_ranks - 1}, each at most once"
            )
        out[str(name)] = tuple(ranks)
    return out


def write_comm_groups(path: Path, groups: Mapping[str, Sequence[int]]) -> None:
    """Write a comm-group JSON (pg_name -> ranks in group order)."""
    lines = [f"  {json.dumps(k)}: {json.dumps(list(v))}" for k, v in groups.items()]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")
