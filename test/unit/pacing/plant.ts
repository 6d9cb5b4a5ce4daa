/**
 * A pure closed loop for the controller's unit tests: one plan, the market model of sim/market
 * (traffic, iPinYou prices, auctions) and an ideal cap in place of the guard (a bid goes out only
 * if confirmed + in flight + bid ≤ E(t)), win notices after a short delay. No Redis: thousands of
 * simulated hours per second, so unit tests can check control behaviour exactly (state round
 * trips, windup, catch-up). The real guard, tracker and Redis are in test/integration/pacing/.
 */
import { type Daypart, isOpenAt, planDayWindows } from '../../../shared/budget/daypart.js';
import { type PacingMode, type ResolvedPlan, resolvePlan } from '../../../shared/budget/model.js';
import { type DayWindow, dayWindow } from '../../../shared/budget/time-zone.js';
import type { PacingController } from '../../../shared/pacing/controller/index.js';
import { evaluateCurve, type PlanPacingParams } from '../../../shared/pacing/types.js';
import { prng } from '../../../shared/random/prng.js';
import { type HourlyShape, Market, runAuction, valuationSampler } from '../../../sim/market/index.js';

/** Settings of a {@link Plant}. */
export interface PlantOptions {
  readonly budgetMicros: number;
  readonly mode?: PacingMode;
  readonly timeZone?: string;
  /** Eligible requests per day. */
  readonly requestsPerDay: number;
  readonly shape: HourlyShape;
  readonly auction?: 'second-price' | 'first-price';
  /** Multiplies traffic over [fromMs, toMs). */
  readonly events?: readonly { fromMs: number; toMs: number; factor: number }[];
  readonly seed?: number;
  /** Median bid at multiplier 1, micros per impression (σ 0.3). @default 1500 */
  readonly valuationMicros?: number;
  /** Micros per iPinYou price unit (the scenario's 10 × priceScale). @default the market's */
  readonly microsPerUnit?: number;
  /**
   * Floats the guards hold, reported as leased: min(this, E − confirmed − in flight) (a guard holds
   * about one float F; with several guards, their sum). @default 0
   */
  readonly floatsMicros?: number;
  /** Dayparting of the plan: no bid goes out while its windows are closed (the guard's rule). */
  readonly daypart?: Daypart;
  /** The plan's own curve (mode `curve`). */
  readonly curve?: readonly number[];
}

/** One plan in a market, stepped tick by tick. */
export class Plant<S, F> {
  plan: ResolvedPlan;
  state: S | undefined;
  forecast: F | undefined;
  params: PlanPacingParams | undefined;
  confirmed = 0;
  inFlight = 0;
  impressions = 0;
  charged = 0;
  /** Bids the plan's closed windows held back (they would have fit E). */
  closedBids = 0;
  /** Max |confirmed − E| / budget seen at minute samples since the last {@link resetDay}. */
  maxDeviation = 0;
  private readonly market: Market;
  private readonly valuation: ReturnType<typeof valuationSampler>;
  private readonly random;
  private pending: { at: number; price: number; bid: number }[] = [];
  private day: DayWindow | undefined;
  private queue: { at: number; competingMicros: number }[] = [];

  constructor(
    readonly controller: PacingController<S, F>,
    readonly options: PlantOptions,
  ) {
    this.plan = resolvePlan(
      {
        level: 'campaign',
        accountId: 'a',
        campaignId: 'c',
        dailyBudgetMicros: options.budgetMicros,
        pacingMode: options.mode ?? 'even',
        ...(options.daypart ? { daypart: options.daypart } : {}),
        ...(options.curve ? { curve: options.curve } : {}),
      },
      options.timeZone ?? 'UTC',
    );
    this.market = new Market({
      traffic: {
        requestsPerDay: options.requestsPerDay,
        shape: options.shape,
        timeZone: options.timeZone ?? 'UTC',
        ...(options.events ? { events: options.events } : {}),
      },
      auction: options.auction ?? 'second-price',
      seed: options.seed ?? 7,
      ...(options.microsPerUnit === undefined ? {} : { microsPerUnit: options.microsPerUnit }),
    });
    this.valuation = valuationSampler(options.valuationMicros ?? 1500);
    this.random = prng((options.seed ?? 7) + 1);
  }

  /** Changes the plan's budget (takes effect at the next tick, as a budgets refresh would). */
  setBudget(micros: number): void {
    this.plan = resolvePlan({ ...this.plan, dailyBudgetMicros: micros }, this.plan.timeZone);
  }

  /** Changes the plan's dayparting (takes effect at the next tick, as a budgets refresh would). */
  setDaypart(daypart: Daypart | undefined): void {
    this.plan = resolvePlan({ ...this.plan, daypart }, this.plan.timeZone);
  }

  /** Changes the plan's own curve (takes effect at the next tick). */
  setCurve(curve: readonly number[]): void {
    this.plan = resolvePlan({ ...this.plan, curve }, this.plan.timeZone);
  }

  /** One controller step at `now` (a tick). */
  tick(now: number, hook?: (prev: S | undefined) => S | undefined): PlanPacingParams {
    const day = dayWindow(now, this.plan.timeZone);
    if (!this.day || this.day.day !== day.day) this.resetDay(day);
    const prev = hook ? hook(this.state) : this.state;
    const r = this.controller.step(
      {
        plan: this.plan,
        day,
        nowMs: now,
        spend: {
          initialised: true,
          confirmedMicros: this.confirmed,
          inFlightMicros: this.inFlight,
          leasedMicros: this.leased(now),
        },
      },
      prev,
      this.forecast,
    );
    this.state = r.state;
    this.forecast = r.forecast;
    this.params = r.params;
    return r.params;
  }

  private leased(now: number): number {
    const floats = this.options.floatsMicros ?? 0;
    if (floats === 0 || !this.params || this.params.day !== this.day?.day) return 0;
    const e = Math.min(this.plan.dailyBudgetMicros, evaluateCurve(this.params.curve, now));
    return Math.max(0, Math.min(floats, e - this.confirmed - this.inFlight));
  }

  private resetDay(day: DayWindow): void {
    this.day = day;
    this.confirmed = 0;
    this.inFlight = 0;
    this.pending = [];
    this.maxDeviation = 0;
  }

  /** Runs the market from `from` to `to` (ms), ticking every 10 s. */
  run(from: number, to: number, onTick?: (now: number, p: PlanPacingParams) => void): void {
    for (let m = from; m < to; m += 60_000) {
      this.queue = this.market.minute(m);
      let q = 0;
      for (let t = m; t < m + 60_000; t += 1000) {
        if (t % 10_000 === 0) {
          const p = this.tick(t);
          onTick?.(t, p);
        }
        for (let i = this.pending.length - 1; i >= 0; i--) {
          const p = this.pending[i] as { at: number; price: number; bid: number };
          if (p.at > t) continue;
          this.pending.splice(i, 1);
          this.inFlight -= p.bid;
          this.confirmed += p.price;
        }
        const params = this.params as PlanPacingParams;
        while (q < this.queue.length && (this.queue[q] as { at: number }).at < t + 1000) {
          const rq = this.queue[q++] as { at: number; competingMicros: number };
          if (this.random() >= params.throttle) continue;
          const bid = Math.max(1, Math.round(this.valuation(this.random) * params.bidMultiplier));
          const cap = Math.min(this.plan.dailyBudgetMicros, evaluateCurve(params.curve, t));
          if (this.confirmed + this.inFlight + bid > cap) continue;
          const windows = planDayWindows(this.plan, this.day as DayWindow);
          if (windows && !isOpenAt(windows, t)) {
            this.closedBids++;
            continue;
          }
          const res = runAuction(
            this.options.auction ?? 'second-price',
            [{ key: 0, bidMicros: bid }],
            rq.competingMicros,
          );
          const won = res.winner !== undefined;
          this.inFlight += bid;
          this.pending.push({
            at: t + 1000 + Math.floor(this.random() * 5000),
            price: won ? res.priceMicros : 0,
            bid,
          });
          if (won) {
            this.impressions++;
            this.charged += res.priceMicros;
          }
        }
      }
      const e = Math.min(
        this.plan.dailyBudgetMicros,
        evaluateCurve((this.params as PlanPacingParams).curve, m + 60_000),
      );
      this.maxDeviation = Math.max(
        this.maxDeviation,
        Math.abs(this.confirmed - e) / this.plan.dailyBudgetMicros,
      );
    }
  }
}

/** Requests per day for `demand × budget` of full-speed spend (second price, base bid 1500, iPinYou 1458). */
export function requestsForDemand(demand: number, budgetMicros: number): number {
  return Math.round((demand * budgetMicros) / 510);
}

/**
 * The parameters `a` and `b` publish over [from, to) — each tick's (t, throttle, multiplier,
 * curve) — with `interrupt()` run after every `every`-th tick of `b` (a takeover: its state and
 * forecast replaced by what another process would decode). Equal traces: `b` continued bit for bit.
 */
export function twinTraces<S, F>(
  a: Plant<S, F>,
  b: Plant<S, F>,
  range: { readonly from: number; readonly to: number },
  every: number,
  interrupt: () => void,
): { readonly a: unknown[]; readonly b: unknown[] } {
  const traceOf = (plant: Plant<S, F>, after?: () => void) => {
    const trace: unknown[] = [];
    plant.run(range.from, range.to, (t, p) => {
      trace.push([t, p.throttle, p.bidMultiplier, p.curve]);
      if (after && trace.length % every === 0) after();
    });
    return trace;
  };
  return { a: traceOf(a), b: traceOf(b, interrupt) };
}
