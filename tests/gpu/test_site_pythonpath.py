"""On a real GPU: a 1/4 job whose packages come only through PYTHONPATH (site packages on
a path, as environment modules set it on HPC systems) keeps them, and its share is still
applied to PyTorch (issue 24: every fractional job failed with "No module named
'jupyter_to_job'" when the share's PYTHONPATH replaced the site's)."""

from __future__ import annotations

import os
from pathlib import Path

from jupyter_to_job.models import JobStatus

from .gpu_jobs import REPO, needs_torch, printed, run_job

USES_THE_SITE = """
import os, sys
import campus_site_probe, torch
print("probe", campus_site_probe.WHERE)
hooks = [i for i, p in enumerate(sys.path) if p.rstrip("/").endswith("share_hooks")]
site = sys.path.index(campus_site_probe.__path__[0].rsplit("/", 1)[0])
print("hooks-first", bool(hooks) and hooks[0] < site)
total = torch.cuda.get_device_properties(0).total_memory
try:
    torch.empty(int(total * 0.30), dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    print("thirty allowed")
except torch.cuda.OutOfMemoryError:
    print("thirty refused")
"""


@needs_torch
async def test_a_quarter_job_keeps_the_sites_pythonpath_and_its_share(gpu_manager, tmp_path: Path):
    # Given a site that provides a package only through PYTHONPATH, with the project's
    # own packages on the same path (as the job service is configured there)
    site = tmp_path / "site-packages"
    (site / "campus_site_probe").mkdir(parents=True)
    (site / "campus_site_probe" / "__init__.py").write_text("WHERE = 'the site'\n")
    manager = await gpu_manager(extra_environment={"PYTHONPATH": f"{site}{os.pathsep}{REPO}"})

    # When a 1/4 job imports it and PyTorch, and asks for 30 % of the card
    job, log = await run_job(manager, "alice", USES_THE_SITE)

    # Then it completes with the site's package, the share's hooks ahead of the site's path,
    # and PyTorch held to its quarter
    assert job.status is JobStatus.COMPLETED, log
    seen = printed(log)
    assert seen["probe"] == "the site", log
    assert seen["hooks-first"] == "True", log
    assert seen["thirty"] == "refused", log
