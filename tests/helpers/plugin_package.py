"""A third-party plugin package as pip installs one, for the registry tests: its modules and a dist-info whose
entry_points.txt names what it adds, in a folder that goes on sys.path."""

from __future__ import annotations

from pathlib import Path


def install(site: Path, distribution: str, entry_points: str, modules: dict[str, str]) -> Path:
    """Write `modules` ({module name: source}) and `distribution`'s dist-info with `entry_points` into `site`."""
    info = site / f"{distribution.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    for name, source in modules.items():
        (site / f"{name}.py").write_text(source, encoding="utf-8")
    return site
