"""On a real GPU machine: a one-node job holding every GPU runs torch.distributed with NCCL
over all of them (issue 28), torchrun-style, one process per GPU."""

from __future__ import annotations

from jupyter_to_job.models import JobStatus

from .gpu_jobs import needs_torch, printed, run_job

# One process per GPU the job sees; each adds its rank on its own GPU with NCCL.
ALL_REDUCE = '''
import os, subprocess, sys, tempfile, torch
count = torch.cuda.device_count()
script = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
script.write("""
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
value = torch.tensor([float(rank)], device="cuda")
dist.all_reduce(value)
if rank == 0:
    print("sum", int(value.item()), flush=True)
    print("world", dist.get_world_size(), flush=True)
    print("backend", dist.get_backend(), flush=True)
dist.destroy_process_group()
""")
script.close()
done = subprocess.run(
    [sys.executable, "-m", "torch.distributed.run", "--standalone",
     f"--nproc_per_node={count}", script.name],
    capture_output=True, text=True,
)
print("devices", count)
print(done.stdout.strip())
print("exit", done.returncode)
if done.returncode:
    print(done.stderr[-4000:])
'''


@needs_torch
async def test_a_job_on_every_gpu_all_reduces_over_nccl(gpu_manager, gpus):
    manager = await gpu_manager()

    # When a job on the flavor holding every GPU of the machine runs an NCCL all-reduce
    job, log = await run_job(manager, "alice", ALL_REDUCE, flavor="all")

    # Then it sees every GPU, each rank took part, and NCCL carried the sum
    assert job.status is JobStatus.COMPLETED, log
    seen = printed(log)
    count = len(gpus)
    assert (seen["devices"], seen["exit"]) == (str(count), "0"), log
    assert seen["world"] == str(count), log
    assert seen["backend"] == "nccl", log
    assert seen["sum"] == str(count * (count - 1) // 2), log
