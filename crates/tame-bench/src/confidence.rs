//! How sure a miss rate is: one-sided Clopper–Pearson bounds for the probability of a
//! miss, from `misses` of `activations` independent trials, and how many activations
//! a bound or a verdict needs.
//!
//! The bounds are the exact (conservative) binomial ones: the upper bound at confidence
//! `c` is the `c` quantile of Beta(k+1, n−k), the lower the `1−c` quantile of
//! Beta(k, n−k+1). Zero misses and all-missed have closed forms; every other quantile is
//! found by bisection on statrs' regularized incomplete beta function, which is monotone
//! in p, so the search always ends and never panics. statrs' own `Beta::inverse_cdf`
//! is not used: its Newton iteration lost accuracy from 10⁶ trials on (4·10⁻⁴ relative
//! at one miss in 10⁶) and did not return at 10⁹. The bisection agrees with scipy's
//! `beta.ppf` to 10⁻¹⁰ relative up to 10⁶ activations, 10⁻⁶ at 10⁹ and 4·10⁻⁴ at 10¹²
//! (the incomplete beta's log-gamma terms lose digits there).
//!
//! Every function takes a `confidence` in (0, 1) (callers check it with
//! [`check_confidence`]); outside it the bounds are the uninformative ones (1 and 0) and
//! the counts are "never".

use statrs::function::beta::checked_beta_reg;

use crate::error::{invalid, Result};

/// The most activations [`activations_to_decide`] looks at: beyond this a run could not
/// collect them (10¹² at 1 kHz is 30 years).
pub const DECIDE_LIMIT: u64 = 1_000_000_000_000;

/// Upper one-sided bound at `confidence` (0.95): the true miss probability is below it
/// with that confidence. No activations, or all of them missed, bound nothing: 1.0.
/// More misses than activations count as all missed.
pub fn upper_bound(misses: u64, activations: u64, confidence: f64) -> f64 {
    if !valid(confidence) || activations == 0 || misses >= activations {
        return 1.0;
    }
    let n = activations as f64;
    if misses == 0 {
        // P(no miss in n) = (1−p)^n = 1−c  ⇒  p = 1 − (1−c)^(1/n), without cancellation.
        return -((1.0 - confidence).ln() / n).exp_m1();
    }
    let k = misses as f64;
    // Never below the observed fraction, which rounding at 10¹⁸ trials could otherwise give.
    beta_quantile(k + 1.0, n - k, confidence).max(k / n)
}

/// Lower one-sided bound at `confidence`: the true miss probability is above it with
/// that confidence. No miss (or no activation) bounds it by nothing: 0.0. More misses
/// than activations count as all missed.
pub fn lower_bound(misses: u64, activations: u64, confidence: f64) -> f64 {
    if !valid(confidence) || misses == 0 || activations == 0 {
        return 0.0;
    }
    let n = activations as f64;
    if misses >= activations {
        // P(all missed) = p^n = 1−c  ⇒  p = (1−c)^(1/n).
        return ((1.0 - confidence).ln() / n).exp();
    }
    let k = misses as f64;
    // Never above the observed fraction, which rounding at 10¹⁸ trials could otherwise give.
    beta_quantile(k, n - k + 1.0, 1.0 - confidence).min(k / n)
}

/// Zero misses: the fewest activations whose upper bound is at or below `target`
/// (≈ 3/target at 95 %; exactly ceil(ln(1−c)/ln(1−target))). `target` ≤ 0 (or an
/// invalid confidence) can never be reached: `u64::MAX`; `target` ≥ 1 needs none.
pub fn activations_for_bound(target: f64, confidence: f64) -> u64 {
    if !valid(confidence) || target.is_nan() || target <= 0.0 {
        return u64::MAX;
    }
    if target >= 1.0 {
        return 0;
    }
    let exact = (1.0 - confidence).ln() / (-target).ln_1p();
    // `as` saturates, so a ratio beyond u64 cannot wrap.
    let mut n = exact.ceil() as u64;
    // The float ratio can be an ulp off either way: settle it on the bound itself.
    while n > 1 && upper_bound(0, n - 1, confidence) <= target {
        n -= 1;
    }
    while n < u64::MAX && upper_bound(0, n, confidence) > target {
        n += 1;
    }
    n
}

/// How many activations in all would decide `tolerated` if the observed miss fraction
/// f = misses/activations held: the smallest n ≥ `activations` with
/// `upper_bound(round(f·n), n) ≤ tolerated` (f < tolerated: enough to show it is met) or
/// `lower_bound(round(f·n), n) > tolerated` (f > tolerated: enough to show it is not).
/// `Some(activations)` when the observed ones already decide.
///
/// `None` when it cannot be decided that way: no activations yet, `tolerated` 0 with no
/// miss (a zero rate cannot be shown by measurement), f equal to `tolerated`, more than
/// [`DECIDE_LIMIT`] activations needed, or an invalid confidence or `tolerated`.
///
/// The search doubles n until the bound decides, then bisects. round(f·n) makes the
/// bound step slightly non-monotone in n, so the answer is the first n of a bisection
/// on a predicate monotone up to that rounding: within a few activations of the
/// smallest.
pub fn activations_to_decide(
    misses: u64,
    activations: u64,
    tolerated: f64,
    confidence: f64,
) -> Option<u64> {
    if !valid(confidence) || activations == 0 || tolerated.is_nan() || tolerated < 0.0 {
        return None;
    }
    let misses = misses.min(activations);
    let fraction = misses as f64 / activations as f64;
    // The observed misses scaled to n activations, in integers: no float error.
    let misses_at = |n: u64| -> u64 {
        let scaled =
            (2 * misses as u128 * n as u128 + activations as u128) / (2 * activations as u128);
        u64::try_from(scaled).unwrap_or(u64::MAX)
    };
    let decides: Box<dyn Fn(u64) -> bool> = if fraction < tolerated {
        if misses == 0 {
            // The zero-miss bound has a closed form and is strictly monotone.
            let needed = activations_for_bound(tolerated, confidence);
            return (needed <= DECIDE_LIMIT).then_some(needed.max(activations));
        }
        Box::new(move |n| upper_bound(misses_at(n), n, confidence) <= tolerated)
    } else if fraction > tolerated {
        Box::new(move |n| lower_bound(misses_at(n), n, confidence) > tolerated)
    } else {
        return None;
    };
    if decides(activations) {
        return Some(activations);
    }
    if activations >= DECIDE_LIMIT {
        return None;
    }
    // Double until decided: `not` never decides, `yes` does.
    let mut not = activations;
    let mut yes = loop {
        let next = not.saturating_mul(2).min(DECIDE_LIMIT);
        if decides(next) {
            break next;
        }
        if next == DECIDE_LIMIT {
            return None;
        }
        not = next;
    };
    while yes - not > 1 {
        let mid = not + (yes - not) / 2;
        if decides(mid) {
            yes = mid;
        } else {
            not = mid;
        }
    }
    Some(yes)
}

/// `c` when it is a confidence (above 0 and below 1), else the user's mistake.
pub fn check_confidence(c: f64) -> Result<f64> {
    if valid(c) {
        Ok(c)
    } else {
        Err(invalid(format!(
            "--confidence {c} must be above 0 and below 1 — e.g. 0.95 or 95%"
        )))
    }
}

/// A confidence as people type it: `0.95` or `95%`.
pub fn parse_confidence(text: &str) -> Result<f64> {
    let trimmed = text.trim();
    let (number, scale) = match trimmed.strip_suffix('%') {
        Some(percent) => (percent.trim_end(), 100.0),
        None => (trimmed, 1.0),
    };
    let value: f64 = number.parse().map_err(|_| {
        invalid(format!(
            "--confidence {text} is not a number — give e.g. 0.95 or 95%"
        ))
    })?;
    check_confidence(value / scale).map_err(|_| {
        invalid(format!(
            "--confidence {text} must be above 0 and below 1 — e.g. 0.95 or 95%"
        ))
    })
}

fn valid(confidence: f64) -> bool {
    confidence > 0.0 && confidence < 1.0
}

/// The `q` quantile of Beta(a, b) (a, b > 0, q in (0, 1)): bisection on the regularized
/// incomplete beta function I_p(a, b), increasing in p, until the interval stops
/// shrinking in f64 (at most ~1100 halvings to the smallest subnormal; in practice
/// about 60–110, each a bounded continued fraction).
fn beta_quantile(a: f64, b: f64, q: f64) -> f64 {
    let (mut below, mut above) = (0.0f64, 1.0f64);
    loop {
        let mid = 0.5 * (below + above);
        if mid <= below || mid >= above {
            return above;
        }
        match checked_beta_reg(a, b, mid) {
            Ok(cdf) if cdf < q => below = mid,
            // An error cannot happen for a, b > 0 and p in (0, 1); move towards the
            // conservative side if it ever did.
            _ => above = mid,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64, relative: f64) -> bool {
        (got - want).abs() <= want.abs() * relative
    }

    /// Clopper–Pearson one-sided bounds at 95 % computed independently with scipy 1.17
    /// (`scipy.stats.beta.ppf(0.95, k+1, n-k)` for the upper, `beta.ppf(0.05, k, n-k+1)`
    /// for the lower); the textbook values agree: n=10, k=0 → 0.2589; n=100, k=0 →
    /// 1−0.05^(1/100) = 0.0295; n=15600, k=0 → 1.92·10⁻⁴ (≈ 3/n).
    const TABLE_95: &[(u64, u64, f64, f64)] = &[
        // (misses, activations, upper, lower)
        (0, 10, 2.5886555089e-01, 0.0),
        (1, 10, 3.9416330244e-01, 5.1161968918e-03),
        (3, 10, 6.0662421611e-01, 8.7264433914e-02),
        (0, 100, 2.9513049607e-02, 0.0),
        (1, 100, 4.6559811454e-02, 5.1280141626e-04),
        (5, 100, 1.0225337764e-01, 1.9905563662e-02),
        (50, 100, 5.8637828537e-01, 4.1362171463e-01),
        (0, 15_600, 1.9201568273e-04, 0.0),
        (1, 15_600, 3.0405739188e-04, 3.2880262859e-06),
        (10, 15_600, 1.0870791131e-03, 3.4782227189e-04),
        (1, 1_000_000, 4.7438556382e-06, 5.1293293072e-08),
        (100, 1_000_000, 1.1807820537e-04, 8.4139902423e-05),
        (5_000, 1_000_000, 5.1175840516e-03, 4.8845431356e-03),
    ];

    #[test]
    fn bounds_match_a_known_clopper_pearson_table() {
        for &(k, n, upper, lower) in TABLE_95 {
            let (u, l) = (upper_bound(k, n, 0.95), lower_bound(k, n, 0.95));
            assert!(close(u, upper, 1e-8), "upper {k}/{n}: {u:e} vs {upper:e}");
            assert!(close(l, lower, 1e-8), "lower {k}/{n}: {l:e} vs {lower:e}");
        }
    }

    /// Other confidences, same source (scipy 1.17, beta.ppf).
    #[test]
    fn bounds_follow_the_confidence() {
        // 99 %: beta.ppf(0.99, 3, 18), beta.ppf(0.01, 2, 19).
        assert!(close(upper_bound(2, 20, 0.99), 3.5833526264e-01, 1e-8));
        assert!(close(lower_bound(2, 20, 0.99), 7.5918566595e-03, 1e-8));
        // 90 %: beta.ppf(0.90, 8, 43), beta.ppf(0.10, 7, 44).
        assert!(close(upper_bound(7, 50, 0.90), 2.2419222369e-01, 1e-8));
        assert!(close(lower_bound(7, 50, 0.90), 7.9629726247e-02, 1e-8));
        // More confidence, a wider interval.
        assert!(upper_bound(2, 20, 0.99) > upper_bound(2, 20, 0.95));
        assert!(lower_bound(2, 20, 0.99) < lower_bound(2, 20, 0.95));
    }

    #[test]
    fn edges_bound_nothing_and_never_panic() {
        assert_eq!(upper_bound(0, 0, 0.95), 1.0);
        assert_eq!(upper_bound(10, 10, 0.95), 1.0);
        assert_eq!(upper_bound(11, 10, 0.95), 1.0);
        assert_eq!(lower_bound(0, 10, 0.95), 0.0);
        assert_eq!(lower_bound(0, 0, 0.95), 0.0);
        // All missed: (1−c)^(1/n); beta.ppf(0.05, 10, 1) = 0.05^(1/10).
        assert!(close(lower_bound(10, 10, 0.95), 0.05f64.powf(0.1), 1e-12));
        assert_eq!(lower_bound(12, 10, 0.95), lower_bound(10, 10, 0.95));
        for bad in [0.0, 1.0, -0.5, 1.5, f64::NAN] {
            assert_eq!(upper_bound(1, 100, bad), 1.0);
            assert_eq!(lower_bound(1, 100, bad), 0.0);
            assert_eq!(activations_for_bound(0.01, bad), u64::MAX);
            assert_eq!(activations_to_decide(1, 100, 0.5, bad), None);
        }
        // The largest counts still give a bound in (0, 1), in time.
        let u = upper_bound(3, u64::MAX, 0.95);
        assert!(u > 0.0 && u < 1e-18, "{u:e}");
        let l = lower_bound(u64::MAX / 2, u64::MAX, 0.95);
        assert!(l > 0.49 && l <= 0.5, "{l}");
    }

    #[test]
    fn zero_misses_need_about_three_over_the_target() {
        // ceil(ln 0.05 / ln(1 − 10⁻⁴)) = ceil(29955.8) = 29956.
        assert_eq!(activations_for_bound(1e-4, 0.95), 29_956);
        assert!(upper_bound(0, 29_956, 0.95) <= 1e-4);
        assert!(upper_bound(0, 29_955, 0.95) > 1e-4);
        // The 24 s at 1 kHz: 15 600 activations bound the rate only by 1.92·10⁻⁴.
        assert_eq!(activations_for_bound(1.9202e-4, 0.95), 15_600);
        assert_eq!(activations_for_bound(0.0, 0.95), u64::MAX);
        assert_eq!(activations_for_bound(-1.0, 0.95), u64::MAX);
        assert_eq!(activations_for_bound(f64::NAN, 0.95), u64::MAX);
        assert_eq!(activations_for_bound(1.0, 0.95), 0);
        // 10⁻¹⁵: ≈ 3·10¹⁵, no overflow.
        let n = activations_for_bound(1e-15, 0.95);
        assert!((2.9e15..3.1e15).contains(&(n as f64)), "{n}");
        assert_eq!(activations_for_bound(f64::MIN_POSITIVE, 0.95), u64::MAX);
    }

    /// The smallest n ≥ `activations` by walking n one at a time: the reference for the bisection.
    fn decide_by_walking(misses: u64, activations: u64, tolerated: f64) -> u64 {
        let f = misses as f64 / activations as f64;
        (activations..)
            .find(|&n| {
                let k = (f * n as f64).round() as u64;
                if f < tolerated {
                    upper_bound(k, n, 0.95) <= tolerated
                } else {
                    lower_bound(k, n, 0.95) > tolerated
                }
            })
            .unwrap()
    }

    #[test]
    fn fewer_misses_than_tolerated_need_more_activations_to_show_met() {
        // 1 miss in 1 000 against 1 %: the upper bound 4.7·10⁻³ already shows it.
        assert_eq!(activations_to_decide(1, 1_000, 0.01, 0.95), Some(1_000));
        // 1 in 100 observed, 2 % tolerated: not yet (upper 4.7 %).
        let n = activations_to_decide(1, 100, 0.02, 0.95).unwrap();
        assert!(n > 100);
        assert!(upper_bound((n as f64 / 100.0).round() as u64, n, 0.95) <= 0.02);
        let walked = decide_by_walking(1, 100, 0.02);
        assert!(n.abs_diff(walked) <= 100, "bisection {n}, walking {walked}");
        // No miss: exactly the zero-miss count.
        assert_eq!(
            activations_to_decide(0, 15_600, 1e-4, 0.95),
            Some(activations_for_bound(1e-4, 0.95))
        );
        assert_eq!(activations_to_decide(0, 50_000, 1e-4, 0.95), Some(50_000));
    }

    #[test]
    fn more_misses_than_tolerated_need_more_activations_to_show_not_met() {
        // 3 in 100 against 1 %: lower bound 0.8 % < 1 %, not yet shown.
        let n = activations_to_decide(3, 100, 0.01, 0.95).unwrap();
        assert!(n > 100);
        assert!(lower_bound((n as f64 * 0.03).round() as u64, n, 0.95) > 0.01);
        let walked = decide_by_walking(3, 100, 0.01);
        assert!(n.abs_diff(walked) <= 40, "bisection {n}, walking {walked}");
        // 30 in 100 against 1 %: already shown.
        assert_eq!(activations_to_decide(30, 100, 0.01, 0.95), Some(100));
        // Any miss against a tolerated 0 is decided at once.
        assert_eq!(activations_to_decide(1, 1_000, 0.0, 0.95), Some(1_000));
    }

    #[test]
    fn undecidable_cases_say_so() {
        // A zero rate cannot be shown by measurement.
        assert_eq!(activations_to_decide(0, 1_000, 0.0, 0.95), None);
        // Observed exactly the tolerated fraction.
        assert_eq!(activations_to_decide(1, 100, 0.01, 0.95), None);
        // No activations yet.
        assert_eq!(activations_to_decide(0, 0, 0.01, 0.95), None);
        // Beyond 10¹² activations.
        assert_eq!(activations_to_decide(0, 10, 1e-13, 0.95), None);
        assert_eq!(
            activations_to_decide(1_000_001, 1_000_000_000, 1e-3, 0.95),
            None
        );
        assert_eq!(activations_to_decide(1, 100, f64::NAN, 0.95), None);
        assert_eq!(activations_to_decide(1, 100, -0.1, 0.95), None);
    }

    #[test]
    fn confidences_are_read_as_people_write_them() {
        assert_eq!(parse_confidence("0.95").unwrap(), 0.95);
        assert_eq!(parse_confidence("95%").unwrap(), 0.95);
        assert!(close(parse_confidence(" 99.9 % ").unwrap(), 0.999, 1e-15));
        for bad in ["95", "0", "1", "100%", "-5%", "x", "", "NaN"] {
            let e = parse_confidence(bad).unwrap_err();
            assert!(e.is_bad_input(), "{bad}");
            assert!(e.to_string().contains("e.g. 0.95 or 95%"), "{e}");
        }
        assert!(check_confidence(0.95).is_ok());
        let e = check_confidence(1.0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--confidence 1 must be above 0 and below 1 — e.g. 0.95 or 95%"
        );
    }
}
