"""One rank of a 2-process DDP Hugging Face Trainer run (launched by torchrun from test_hf_ddp.py)."""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta
from pathlib import Path

import torch
import transformers

sys.path.insert(0, str(Path(__file__).parent))
from gt_dirty_spell import T0  # noqa: E402

from greentrain.clock import ReplayClock  # noqa: E402
from greentrain.integrations.hf import GreenTrainCallback  # noqa: E402

STEPS = 12


class Tokens(torch.utils.data.Dataset):
    def __init__(self) -> None:
        self.ids = torch.randint(0, 64, (STEPS * 8, 16), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main(out: Path) -> None:
    rank = int(os.environ["RANK"])
    transformers.set_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2, resid_pdrop=0.0,
                                     embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    args = transformers.TrainingArguments(output_dir=str(out / "run"), max_steps=STEPS, per_device_train_batch_size=4,
                                          report_to=[], save_strategy="no", logging_strategy="no", use_cpu=True,
                                          ddp_backend="gloo", seed=0, disable_tqdm=True)
    trainer = transformers.Trainer(model=transformers.GPT2LMHeadModel(config), args=args, train_dataset=Tokens())
    # The replayed day starts now, not before the (slow) process-group and Trainer set-up.
    clock = ReplayClock(T0 + timedelta(minutes=59, seconds=50), speedup=3600.0)
    policy = out / "policy.toml"  # policy and trace were written by the test before launch
    callback = GreenTrainCallback(policy=str(policy), provider=f"csv:{out / 'gb-dirty-spell.csv'}", zone="GB",
                                  clock=clock, deadline=T0 + timedelta(hours=24),
                                  devices=False, progress=False, decide_interval_s=1.0)
    trainer.add_callback(callback)
    trainer.train()
    record = {"rank": rank, "paused": callback.paused, "paused_at": trainer.state.global_step}
    if callback.paused:
        callback.wait_for_resume()
        trainer.train(resume_from_checkpoint=True)
    callback.close()
    record["final_step"] = trainer.state.global_step
    record["checksum"] = float(sum(p.double().sum() for p in trainer.model.parameters()))
    (out / f"rank{rank}.json").write_text(json.dumps(record))
    # Torch's gloo teardown, not greentrain's: DDP's Reducer, freed at interpreter teardown with the GIL
    # held, joins a gloo worker thread that needs the GIL to free a finished collective's tensors (a hang
    # on 2.13, SIGABRT on 2.14.1; destroying the group first was not enough: a run on 2.11 still timed
    # out after training, the Reducer still holding the group). The barrier: both ranks are past their
    # last collective and their record is written; then the process ends without interpreter teardown.
    torch.distributed.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
