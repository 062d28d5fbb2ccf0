"""Spring-named metrics, recorded with prometheus_client, correct under several gunicorn workers.

prometheus_client is the single store: ``/actuator/prometheus`` prints it and ``/actuator/metrics``
reads it back as Spring's meters (dots for underscores, COUNT/TOTAL_TIME/MAX/VALUE statistics).
With ``PROMETHEUS_MULTIPROC_DIR`` set (gunicorn), every worker writes its values to files there and
a scrape merges them: counters and summaries add up, gauges use the mode declared below.
Custom collectors do not work across processes, so each worker samples its own CPU, memory and
connection pool into gauges on a timer; ``cache_size`` is read at scrape time, because the cache
(Redis) is shared anyway.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.db import connections
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    REGISTRY,
    CollectorRegistry,
    Gauge,
    Histogram,
    Summary,
    disable_created_metrics,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from platform_site.internals import locmem_cache_entries

# Micrometer emits no *_created series.
disable_created_metrics()  # type: ignore[no-untyped-call]
# The default collectors describe one process and vanish in multiprocess mode; the gauges below
# replace them in both modes, so one worker and four workers expose the same series.
for _collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
    with contextlib.suppress(KeyError):  # already gone when this module is reloaded
        REGISTRY.unregister(_collector)

SAMPLE_SECONDS = 5.0
MAX_WINDOW_SECONDS = 120.0  # Micrometer's max decays over about two minutes

HTTP_LABELS = ("error", "exception", "method", "outcome", "status", "uri")
http_server_requests = Summary(
    "http_server_requests_seconds", "Duration of HTTP server request handling", HTTP_LABELS
)
http_server_requests_max = Gauge(
    "http_server_requests_seconds_max",
    "Longest HTTP server request handling in the last two minutes",
    HTTP_LABELS,
    multiprocess_mode="livemax",
)
# Spring's meter above is a summary (count, total, max): no percentiles. This histogram gives
# them, by route and method only, to keep its series few (the dashboards' latency panels).
HTTP_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25)
http_request_seconds = Histogram(
    "platform_http_request_seconds",
    "Duration of HTTP server request handling by route and method (a long poll's or a stream's "
    "includes its wait)",
    ["method", "uri"],
    buckets=HTTP_SECONDS_BUCKETS,
)
process_cpu_usage = Gauge(
    "process_cpu_usage",
    'The "recent cpu usage" of the platform processes, as a share of all CPUs (0..1)',
    multiprocess_mode="livesum",
)
process_resident_memory = Gauge(
    "process_resident_memory_bytes",
    "Resident memory of the platform processes in bytes",
    multiprocess_mode="livesum",
)
# Each worker has its own psycopg pool, so sums across live workers are the application's figures.
hikaricp_connections_active = Gauge(
    "hikaricp_connections_active", "Active connections", ["pool"], multiprocess_mode="livesum"
)
hikaricp_connections_idle = Gauge(
    "hikaricp_connections_idle", "Idle connections", ["pool"], multiprocess_mode="livesum"
)
hikaricp_connections_pending = Gauge(
    "hikaricp_connections_pending", "Pending threads", ["pool"], multiprocess_mode="livesum"
)
hikaricp_connections_max = Gauge(
    "hikaricp_connections_max", "Max connections", ["pool"], multiprocess_mode="livesum"
)
hikaricp_connections_min = Gauge(
    "hikaricp_connections_min", "Min connections", ["pool"], multiprocess_mode="livesum"
)

# Micrometer's CacheMeterBinder text, word for word.
CACHE_SIZE_HELP = " ".join(
    [
        "The number of entries in this cache.",
        "This may be an approximation, depending on the type of cache.",
    ]
)


def _outcome(status: int) -> str:
    return {
        1: "INFORMATIONAL",
        2: "SUCCESS",
        3: "REDIRECTION",
        4: "CLIENT_ERROR",
        5: "SERVER_ERROR",
    }.get(status // 100, "UNKNOWN")


def http_request_observe(
    *, method: str, uri: str, status: int, exception: str | None, seconds: float
) -> None:
    exception_label = exception or "none"
    labels = (exception_label, exception_label, method, _outcome(status), str(status), uri)
    http_server_requests.labels(*labels).observe(seconds)
    http_request_seconds.labels(method, uri).observe(seconds)
    _sampler.observe_max(labels, seconds)
    _sampler.ensure_running()


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _resident_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return None


class ProcessSampler:
    """Samples this process into the gauges: on a timer in every worker, and at every scrape."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._last_cpu = (_cpu_seconds(), time.monotonic())
        self._max_windows: dict[tuple[str, ...], tuple[float, float]] = {}

    def ensure_running(self) -> None:
        # A forked worker inherits the flag but not the thread, hence the pid.
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._last_cpu = (_cpu_seconds(), time.monotonic())
            threading.Thread(target=self._run, name="metrics-sampler", daemon=True).start()

    def _run(self) -> None:
        while True:
            self.sample()
            time.sleep(SAMPLE_SECONDS)

    def observe_max(self, labels: tuple[str, ...], seconds: float) -> None:
        now = time.monotonic()
        with self._lock:
            started, current = self._max_windows.get(labels, (now, 0.0))
            if now - started >= MAX_WINDOW_SECONDS:
                started, current = now, 0.0
            if seconds >= current:
                current = seconds
                http_server_requests_max.labels(*labels).set(current)
            self._max_windows[labels] = (started, current)

    def sample(self) -> None:
        now = time.monotonic()
        cpu = _cpu_seconds()
        with self._lock:
            last_cpu, last_time = self._last_cpu
            self._last_cpu = (cpu, now)
            for labels, (started, _) in list(self._max_windows.items()):
                if now - started >= MAX_WINDOW_SECONDS:
                    http_server_requests_max.labels(*labels).set(0.0)
                    del self._max_windows[labels]
        if now > last_time:
            process_cpu_usage.set(max(0.0, (cpu - last_cpu) / (now - last_time) / _cpu_count()))
        resident = _resident_bytes()
        if resident is not None:
            process_resident_memory.set(resident)
        for alias in settings.DATABASES:
            pool = getattr(connections[alias], "pool", None)
            if pool is None:
                continue
            stats = pool.get_stats()
            hikaricp_connections_active.labels(alias).set(
                stats["pool_size"] - stats["pool_available"]
            )
            hikaricp_connections_idle.labels(alias).set(stats["pool_available"])
            hikaricp_connections_pending.labels(alias).set(stats["requests_waiting"])
            hikaricp_connections_max.labels(alias).set(stats["pool_max"])
            hikaricp_connections_min.labels(alias).set(stats["pool_min"])


_sampler = ProcessSampler()


def _cache_entries(alias: str) -> int | None:
    cache: Any = caches[alias]
    entries = locmem_cache_entries(cache)
    if entries is not None:
        return entries
    if hasattr(cache, "client"):  # django-redis: the whole Redis database the cache lives in
        try:
            return int(cache.client.get_client(write=False).dbsize())
        except RedisError:
            return None
    return None


class CacheSizeCollector(Collector):
    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("cache_size", CACHE_SIZE_HELP, labels=["cache", "cache_manager"])

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("cache_size", CACHE_SIZE_HELP, labels=["cache", "cache_manager"])
        for alias in settings.CACHES:
            entries = _cache_entries(alias)
            if entries is not None:
                family.add_metric([alias, "django"], entries)
        yield family


_scrape_collectors: list[Collector] = []


def register_scrape_collector(collector: Collector) -> None:
    """Add a collector that reads shared state (the cache, the database) when Prometheus scrapes.

    Such figures are the same whichever worker answers, so they need no multiprocess files.
    """
    _scrape_collectors.append(collector)
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        REGISTRY.register(collector)


register_scrape_collector(CacheSizeCollector())


def scrape_registry() -> CollectorRegistry:
    """The registry a scrape reads: this process alone, or every worker's files merged."""
    _sampler.sample()
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    for collector in _scrape_collectors:
        registry.register(collector)
    return registry


# --- Spring's /actuator/metrics view of the same registry ----------------------------------------

_STATISTIC_ORDER = ("COUNT", "TOTAL_TIME", "TOTAL", "MAX", "VALUE")
_UNIT_SUFFIXES = {"_seconds": "seconds", "_bytes": "bytes"}


@dataclass
class Meter:
    name: str
    description: str
    base_unit: str | None
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def _spring_name(prometheus_name: str) -> tuple[str, str | None]:
    for suffix, unit in _UNIT_SUFFIXES.items():
        if prometheus_name.endswith(suffix):
            return prometheus_name.removesuffix(suffix).replace("_", "."), unit
    return prometheus_name.replace("_", "."), None


def meters(registry: CollectorRegistry) -> dict[str, Meter]:
    families = list(registry.collect())
    timed = {family.name for family in families if family.type in {"summary", "histogram"}}
    result: dict[str, Meter] = {}

    def meter_for(prometheus_name: str, description: str) -> Meter:
        name, unit = _spring_name(prometheus_name)
        return result.setdefault(name, Meter(name, description, unit))

    for family in families:
        if family.type in {"summary", "histogram"}:
            meter = meter_for(family.name, family.documentation)
            for sample in family.samples:
                statistic = {"_count": "COUNT", "_sum": "TOTAL_TIME"}.get(
                    sample.name.removeprefix(family.name)
                )
                if statistic is not None:
                    meter.samples.append((statistic, dict(sample.labels), float(sample.value)))
        elif family.type == "gauge" and family.name.removesuffix("_max") in timed:
            meter = meter_for(family.name.removesuffix("_max"), family.documentation)
            meter.samples.extend(("MAX", dict(s.labels), float(s.value)) for s in family.samples)
        elif family.type in {"gauge", "counter"}:
            meter = meter_for(family.name, family.documentation)
            statistic = "VALUE" if family.type == "gauge" else "COUNT"
            meter.samples.extend(
                (statistic, dict(s.labels), float(s.value)) for s in family.samples
            )
    return {name: meter for name, meter in result.items() if meter.samples}


def meter_json(meter: Meter, tags: list[tuple[str, str]]) -> dict[str, Any] | None:
    """Spring's body for one meter narrowed by ``tags``; None when no sample matches them."""
    matching = [
        (statistic, labels, value)
        for statistic, labels, value in meter.samples
        if all(labels.get(key) == wanted for key, wanted in tags)
    ]
    if not matching:
        return None
    merged: dict[str, float] = {}
    for statistic, _, value in matching:
        if statistic == "MAX":
            merged[statistic] = max(merged.get(statistic, value), value)
        else:
            merged[statistic] = merged.get(statistic, 0.0) + value
    filtered = {key for key, _ in tags}
    available: dict[str, set[str]] = {}
    for _, labels, _ in matching:
        for key, label_value in labels.items():
            if key not in filtered:
                available.setdefault(key, set()).add(label_value)
    body: dict[str, Any] = {"name": meter.name}
    if meter.description:
        body["description"] = meter.description
    if meter.base_unit:
        body["baseUnit"] = meter.base_unit
    body["measurements"] = [
        {"statistic": statistic, "value": merged[statistic]}
        for statistic in _STATISTIC_ORDER
        if statistic in merged
    ]
    body["availableTags"] = [
        {"tag": key, "values": sorted(values)} for key, values in sorted(available.items())
    ]
    return body
