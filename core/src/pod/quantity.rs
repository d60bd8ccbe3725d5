//! Kubernetes resource quantities (`250m`, `0.5`, `512Mi`, `1e3`), read exactly, so that a request
//! can be compared with its limit before anything is applied.
//!
//! Our own parser: k8s-openapi carries a quantity as its text only, and the crates that parse one
//! tie themselves to a version of k8s-openapi. The grammar is the one of
//! `k8s.io/apimachinery/pkg/api/resource` (the `Quantity` type's documentation):
//! `<signedNumber><suffix>`, the suffix a binary one (`Ki` … `Ei`), a decimal one (`n`, `u`, `m`,
//! none, `k`, `M`, `G`, `T`, `P`, `E`) or a decimal exponent (`e3`, `E-2`).

/// Digits of a number we read: far beyond any real quantity, small enough that its value in
/// nano-units fits an `i128`.
const MAX_DIGITS: usize = 24;

/// The value of a quantity in nano-units (10^-9), rounded up as Kubernetes rounds a quantity more
/// precise than it holds; `None` when `text` is not a quantity or is too large to compare.
pub fn nanos(text: &str) -> Option<i128> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let end = rest.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.len() + fraction.len() == 0 || whole.len() + fraction.len() > MAX_DIGITS || fraction.contains('.') {
        return None;
    }
    let (ten, two) = suffix_powers(suffix)?;
    let digits: i128 = format!("{whole}{fraction}").parse().ok()?;
    // value = digits * 10^(ten - fraction.len()) * 2^two, in units of 10^-9.
    let ten = ten.checked_add(9)?.checked_sub(i32::try_from(fraction.len()).ok()?)?;
    let mut value = digits.checked_mul(2i128.checked_pow(two)?)?;
    if ten >= 0 {
        value = value.checked_mul(10i128.checked_pow(u32::try_from(ten).ok()?)?)?;
    } else {
        let divisor = 10i128.checked_pow(u32::try_from(-ten).ok()?).unwrap_or(i128::MAX);
        value = value / divisor + i128::from(value % divisor != 0);
    }
    Some(if negative { -value } else { value })
}

/// The powers of ten and of two a suffix stands for.
fn suffix_powers(suffix: &str) -> Option<(i32, u32)> {
    Some(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 3 {
                return None;
            }
            (exponent.parse().ok()?, 0)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::nanos;

    #[test]
    fn quantities_read_as_kubernetes_reads_them() {
        let cases = [
            ("1", 1_000_000_000),
            ("250m", 250_000_000),
            ("0.5", 500_000_000),
            (".5", 500_000_000),
            ("1.", 1_000_000_000),
            ("+2", 2_000_000_000),
            ("-1", -1_000_000_000),
            ("1Ki", 1024 * 1_000_000_000),
            ("512Mi", 512 * (1 << 20) * 1_000_000_000i128),
            ("1.5Gi", 3 * (1 << 29) * 1_000_000_000i128),
            ("2k", 2_000 * 1_000_000_000),
            ("1e3", 1_000 * 1_000_000_000),
            ("1E-3", 1_000_000),
            ("5n", 5),
            ("1u", 1_000),
            ("1E", 1_000_000_000_000_000_000_000_000_000),
        ];
        for (text, want) in cases {
            assert_eq!(nanos(text), Some(want), "{text}");
        }
        // Rounded up, as a quantity more precise than nano-units is.
        assert_eq!(nanos("0.0000000001"), Some(1));
        // Equal values in other spellings compare equal.
        assert_eq!(nanos("1"), nanos("1000m"));
        assert_eq!(nanos("1Gi"), nanos("1024Mi"));
    }

    #[test]
    fn what_is_not_a_quantity_is_refused() {
        for text in ["", "m", "1mi", "1 Gi", "abc", "1.2.3", "1e", "1e+", "1KiB", "--1", "1e9999", "0x10", "1,5"] {
            assert_eq!(nanos(text), None, "{text:?}");
        }
        assert_eq!(nanos(&"9".repeat(30)), None, "too many digits");
    }
}
