"""The question-to-program parser: a GRU encoder-decoder with attention (as in Yi et al. 2018).

Trained with teacher forcing on (question, program tokens) pairs; decoding is
greedy and constrained so that the tokens always form exactly one complete
program tree (see `players.pixel.program_tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from players.pixel.program_tokens import RESERVED

START_ID = RESERVED.index("<start>")


@dataclass(frozen=True)
class ParserConfig:
    word_width: int = 64
    token_width: int = 64
    hidden: int = 128
    max_tokens: int = 32


class ProgramParser(nn.Module):
    """Bidirectional GRU over the words; a GRU over program tokens attends to it."""

    def __init__(self, config: ParserConfig, vocabulary_size: int, token_count: int):
        super().__init__()
        self.config = config
        hidden = config.hidden
        self.words = nn.Embedding(vocabulary_size, config.word_width, padding_idx=0)
        self.encoder = nn.GRU(config.word_width, hidden // 2, batch_first=True, bidirectional=True)
        self.initial = nn.Linear(hidden, hidden)
        self.tokens = nn.Embedding(token_count, config.token_width, padding_idx=0)
        self.decoder = nn.GRU(config.token_width, hidden, batch_first=True)
        self.attention = nn.Linear(hidden, hidden, bias=False)
        self.out = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.Tanh(), nn.Linear(hidden, token_count))

    def encode(self, words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Encoder outputs (B, L, H), the word mask (B, L) and the decoder's first state (1, B, H)."""
        mask = words != 0
        # Packed, so that the backward direction starts at each question's last word whatever the batch's
        # padding: unpacked, the same question parsed differently in a batch of longer ones.
        lengths = mask.sum(1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(self.words(words), lengths, batch_first=True, enforce_sorted=False)
        outputs, _ = self.encoder(packed)
        outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs, batch_first=True, total_length=words.shape[1])
        # Mean over the real words: a summary that ignores padding in both directions.
        summary = (outputs * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        return outputs, mask, torch.tanh(self.initial(summary)).unsqueeze(0)

    def _scores(self, states: torch.Tensor, outputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        attention = torch.einsum("bth,blh->btl", self.attention(states), outputs)
        weights = attention.masked_fill(~mask.unsqueeze(1), float("-inf")).softmax(dim=-1)
        context = torch.einsum("btl,blh->bth", weights, outputs)
        return self.out(torch.cat([states, context], dim=-1))

    def forward(self, words: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits (B, T, V) for target ids (B, T) (0 after the program ends)."""
        outputs, mask, state = self.encode(words)
        start = torch.full_like(targets[:, :1], START_ID)
        inputs = torch.cat([start, targets[:, :-1]], dim=1)
        states, _ = self.decoder(self.tokens(inputs), state)
        return self._scores(states, outputs, mask)

    @torch.no_grad()
    def decode(self, words: torch.Tensor, arity: torch.Tensor) -> torch.Tensor:
        """(B, max_tokens) greedy ids, 0 after each program's end; `arity` (V,) per token, -1 = never."""
        limit = self.config.max_tokens
        outputs, mask, state = self.encode(words)
        batch = words.shape[0]
        result = torch.zeros(batch, limit, dtype=torch.long, device=words.device)
        previous = torch.full((batch, 1), START_ID, dtype=torch.long, device=words.device)
        open_inputs = torch.ones(batch, dtype=torch.long, device=words.device)
        usable = arity >= 0
        for step in range(limit):
            if not bool((open_inputs > 0).any()):
                break
            states, state = self.decoder(self.tokens(previous), state)
            logits = self._scores(states, outputs, mask)[:, 0]
            # After this token, open + arity - 1 inputs remain and at most limit - step - 1 tokens.
            room = limit - step - 1
            allowed = usable.unsqueeze(0) & (open_inputs.unsqueeze(1) + arity.unsqueeze(0) - 1 <= room)
            choice = logits.masked_fill(~allowed, float("-inf")).argmax(dim=-1)
            active = open_inputs > 0
            choice = torch.where(active, choice, torch.zeros_like(choice))
            result[:, step] = choice
            open_inputs = torch.where(active, open_inputs + arity[choice] - 1, open_inputs)
            previous = choice.unsqueeze(1)
        return result
