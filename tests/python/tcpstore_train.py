"""A worker of test_tcpstore.py's torchrun jobs: gloo over torch's own
env:// store (torchrun's workers keep theirs), after a rendezvous on the
coordinator's TCPStore port. With TCPSTORE_TRAIN_HOLD=DIR it waits for
DIR/go before the collective, so a test can act on a formed job."""
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
hold = os.environ.get("TCPSTORE_TRAIN_HOLD")
if hold:
    open(os.path.join(hold, f"formed-{dist.get_rank()}-"
                      f"{os.environ.get('TORCHELASTIC_RESTART_COUNT')}"), "w").close()
    while not os.path.exists(os.path.join(hold, "go")):
        time.sleep(0.05)
t = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(t)
print(f"rank {dist.get_rank()}/{dist.get_world_size()} sum {t.item()} restart "
      f"{os.environ.get('TORCHELASTIC_RESTART_COUNT')} use_agent_store "
      f"{os.environ.get('TORCHELASTIC_USE_AGENT_STORE')} master "
      f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}", flush=True)
dist.destroy_process_group()
