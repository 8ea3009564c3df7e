"""IndexTTS2's conditional flow matching at inference: Euler steps from noise to mel with classifier-free
guidance and the prompt mel as in-context prompt.

1. z = noise (B, 80, T) * temperature (drawn from ``generator`` unless given).
2. prompt_x = the prompt mel in its first T_ref frames, zeros after; x = z with its first T_ref frames zeroed.
3. For t over linspace(0, 1, steps + 1) (t accumulated as upstream does): velocity v from the estimator;
   with guidance rate r > 0 the estimator runs once on a batch of two, (x, prompt_x, style, mu) and
   (x, 0, 0, 0), and v = (1 + r) v_cond - r v_uncond; x += dt * v; the prompt frames of x are zeroed again.
4. Returns the last x (B, 80, T), prompt frames zero.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from networks.s2mel.dit import DiT

Trace = dict[str, object] | None


class CFM(nn.Module):
    def __init__(self, estimator: DiT) -> None:
        super().__init__()
        self.estimator = estimator

    def inference(
        self,
        mu: Tensor,
        x_lens: Tensor,
        prompt: Tensor,
        style: Tensor,
        steps: int,
        cfg_rate: float = 0.7,
        *,
        temperature: float = 1.0,
        noise: Tensor | None = None,
        generator: torch.Generator | None = None,
        trace: Trace = None,
    ) -> Tensor:
        """mu (B, T, C), x_lens (B,), prompt (B, 80, T_ref), style (B, S) -> mel (B, 80, T).

        ``trace`` (a dict) receives ``t_steps`` (steps,), ``x_steps`` (steps + 1, B, 80, T),
        ``est_out_first`` / ``est_out_last`` (raw estimator outputs) and ``dit_*`` of the first call.
        """
        if steps < 1:
            raise ValueError(f"the number of flow-matching steps must be at least 1, got {steps}")
        batch, length = mu.shape[0], mu.shape[1]
        shape = (batch, self.estimator.n_mels, length)
        if noise is None:
            noise = torch.randn(shape, generator=generator, device=mu.device, dtype=mu.dtype)
        elif tuple(noise.shape) != shape:
            raise ValueError(f"CFM noise must have shape {shape}, got {tuple(noise.shape)}")
        x = noise * temperature
        prompt_len = prompt.shape[-1]
        prompt_x = torch.zeros_like(x)
        prompt_x[..., :prompt_len] = prompt
        x[..., :prompt_len] = 0
        t_span = torch.linspace(0, 1, steps + 1, device=mu.device, dtype=mu.dtype)
        t, dt = t_span[0], t_span[1] - t_span[0]
        t_steps: list[Tensor] = []
        x_steps = [x.clone()] if trace is not None else []
        taps: dict[str, Tensor] | None = {} if trace is not None else None
        for step in range(1, steps + 1):
            t_steps.append(t)
            velocity = self._velocity(x, prompt_x, x_lens, t, style, mu, cfg_rate, taps, trace, step == steps)
            taps = None
            x = x + dt * velocity
            t = t + dt
            if step < steps:
                dt = t_span[step + 1] - t
            x[..., :prompt_len] = 0
            if trace is not None:
                x_steps.append(x.clone())
        if trace is not None:
            trace["t_steps"] = torch.stack(t_steps)
            trace["x_steps"] = torch.stack(x_steps)
        return x

    def _velocity(
        self,
        x: Tensor,
        prompt_x: Tensor,
        x_lens: Tensor,
        t: Tensor,
        style: Tensor,
        mu: Tensor,
        cfg_rate: float,
        taps: dict[str, Tensor] | None,
        trace: Trace,
        last: bool,
    ) -> Tensor:
        batch = x.shape[0]
        if cfg_rate > 0:
            out = self.estimator(
                torch.cat([x, x]),
                torch.cat([prompt_x, torch.zeros_like(prompt_x)]),
                torch.cat([x_lens, x_lens]),
                t.reshape(1).expand(2 * batch),
                torch.cat([style, torch.zeros_like(style)]),
                torch.cat([mu, torch.zeros_like(mu)]),
                taps=taps,
            )
            conditional, unconditional = out[:batch], out[batch:]
            velocity = (1.0 + cfg_rate) * conditional - cfg_rate * unconditional
        else:
            out = self.estimator(x, prompt_x, x_lens, t.reshape(1).expand(batch), style, mu, taps=taps)
            velocity = out
        if trace is not None:
            if taps is not None:
                trace.update(taps)
                trace["est_out_first"] = out
            if last:
                trace["est_out_last"] = out
        return velocity
