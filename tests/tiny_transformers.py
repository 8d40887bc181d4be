"""The tiny BERT and GPT-2 of ../shared/models (fetch_models.sh), rebuilt in torch from `transformers`
with the same config and seed as shared/models/scripts/export_tiny_transformers.py: FILE.py:FUNC entry
points for `diff --vs-torch`. Imported only by the opt-in real-model tests (it needs transformers)."""

from __future__ import annotations

import torch
from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel


class W(torch.nn.Module):
    """Positional (input_ids, attention_mask), as the export script wraps the models."""

    def __init__(self, m, keys):
        super().__init__()
        self.m = m
        self.keys = keys

    def forward(self, input_ids, attention_mask):
        o = self.m(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        return tuple(o[k] for k in self.keys)


def _both():
    torch.manual_seed(0)
    ids = torch.randint(0, 1000, (1, 16))
    mask = torch.ones(1, 16, dtype=torch.int64)
    bert = W(BertModel(BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=256, max_position_embeddings=128,
                                  attn_implementation="eager")).eval(),
             ["last_hidden_state", "pooler_output"]).eval()
    gpt2 = W(GPT2LMHeadModel(GPT2Config(vocab_size=1000, n_embd=128, n_layer=2, n_head=4, n_positions=128,
                                        use_cache=False, attn_implementation="eager")).eval(), ["logits"]).eval()
    return bert, gpt2, (ids, mask)


def bert():
    b, _, args = _both()
    return b, args


def gpt2():
    _, g, args = _both()
    return g, args
