//! Each variable declared once. [`variables!`] makes a group's struct from one line per variable
//! — field, type, default, ProxySQL name (and old names), what it takes, documentation — and
//! from that same line its defaults, its setter, its listing (`global_variables`, `SHOW …
//! VARIABLES`, exports, cluster checksums) and its row in the reference table
//! (`docs/variables.md`, see [`crate::variables_reference`]). A [`Codec`] says what a variable
//! takes: it parses the text an operator gives, shows the value the way it is listed (so a
//! listing sets back to the same value), and describes itself for the reference table.

use super::values::{VariableError, parse_var_bool, parse_var_int};

/// Flags a declaration may carry after its codec.
#[allow(non_upper_case_globals)]
pub(crate) mod flag {
    /// Takes effect after a restart only.
    pub(crate) const restart: u8 = 1;
    /// Listed (and documented) under the `pgsql-` prefix only; still accepted under the other.
    pub(crate) const pgsql_only: u8 = 2;
}

/// Whether a variable declared with `flags` is listed under `prefix`.
pub(crate) fn listed(flags: u8, prefix: &str) -> bool {
    flags & flag::pgsql_only == 0 || prefix == "pgsql"
}

/// One row of the reference table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariableRow {
    /// The name under its prefix, as ProxySQL spells it (`mysql-connect_timeout_server`).
    pub name: String,
    /// The default, as listed.
    pub default: String,
    /// What it takes (a range, a list of words, a shape).
    pub takes: String,
    /// Takes effect after a restart only.
    pub restart: bool,
    /// The declaration's documentation, lines joined.
    pub doc: String,
}

impl VariableRow {
    pub(crate) fn new(
        prefix: &str,
        name: &str,
        default: String,
        takes: String,
        flags: u8,
        doc: &[&str],
    ) -> VariableRow {
        VariableRow {
            name: format!("{prefix}-{name}"),
            default,
            takes,
            restart: flags & flag::restart != 0,
            doc: doc.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" "),
        }
    }
}

/// What a variable of type `T` takes.
pub(crate) trait Codec<T> {
    /// The value for the text `v` given to `{prefix}-{name}`, or an error naming the variable.
    fn parse(&self, prefix: &str, name: &str, v: &str) -> Result<T, VariableError>;
    /// The value as listed; [`Codec::parse`] of it gives the value back.
    fn show(&self, value: &T) -> String;
    /// What it takes, for the reference table.
    fn takes(&self) -> String;
}

/// A whole number within `min..=max`.
pub(crate) struct Int(pub u64, pub u64);

impl Int {
    fn range(&self) -> String {
        format!("{} – {}", self.0, self.1)
    }
}

impl Codec<u64> for Int {
    fn parse(&self, prefix: &str, name: &str, v: &str) -> Result<u64, VariableError> {
        parse_var_int(prefix, name, v, self.0, self.1)
    }
    fn show(&self, value: &u64) -> String {
        value.to_string()
    }
    fn takes(&self) -> String {
        self.range()
    }
}

/// Narrower integer fields: the declared range must fit the type, which a unit test checks for
/// every declaration (`every_default_is_accepted_and_round_trips`).
macro_rules! narrow_int {
    ($($ty:ty),*) => {$(
        impl Codec<$ty> for Int {
            fn parse(&self, prefix: &str, name: &str, v: &str) -> Result<$ty, VariableError> {
                let n = parse_var_int(prefix, name, v, self.0, self.1)?;
                <$ty>::try_from(n).map_err(|_| VariableError::OutOfRange {
                    name: format!("{prefix}-{name}"),
                    value: n,
                    min: self.0,
                    max: u64::from(<$ty>::MAX),
                })
            }
            fn show(&self, value: &$ty) -> String {
                value.to_string()
            }
            fn takes(&self) -> String {
                self.range()
            }
        }
    )*};
}
narrow_int!(u16, u32);

/// `true`/`false` (also `1`/`0`), listed as `true`/`false`.
pub(crate) struct Bool;

impl Codec<bool> for Bool {
    fn parse(&self, prefix: &str, name: &str, v: &str) -> Result<bool, VariableError> {
        parse_var_bool(prefix, name, v)
    }
    fn show(&self, value: &bool) -> String {
        value.to_string()
    }
    fn takes(&self) -> String {
        "true or false".into()
    }
}

/// A number `0..=max` read as a switch (on when above 0) and listed as `0`/`1`, for ProxySQL
/// variables that are numbers with more levels than Sluice distinguishes.
pub(crate) struct Level(pub u64);

impl Codec<bool> for Level {
    fn parse(&self, prefix: &str, name: &str, v: &str) -> Result<bool, VariableError> {
        Ok(parse_var_int(prefix, name, v, 0, self.0)? > 0)
    }
    fn show(&self, value: &bool) -> String {
        u8::from(*value).to_string()
    }
    fn takes(&self) -> String {
        format!("0 – {} (0 off, above 0 on)", self.0)
    }
}

/// Text, kept as given.
pub(crate) struct Text;

impl Codec<String> for Text {
    fn parse(&self, _: &str, _: &str, v: &str) -> Result<String, VariableError> {
        Ok(v.to_string())
    }
    fn show(&self, value: &String) -> String {
        value.clone()
    }
    fn takes(&self) -> String {
        "text".into()
    }
}

/// Text without its surrounding blanks (paths, tokens, lists).
pub(crate) struct Trimmed;

impl Codec<String> for Trimmed {
    fn parse(&self, _: &str, _: &str, v: &str) -> Result<String, VariableError> {
        Ok(v.trim().to_string())
    }
    fn show(&self, value: &String) -> String {
        value.clone()
    }
    fn takes(&self) -> String {
        "text".into()
    }
}

/// A list of names, compared without regard to case: kept trimmed and in lower case.
pub(crate) struct LowerCase;

impl Codec<String> for LowerCase {
    fn parse(&self, _: &str, _: &str, v: &str) -> Result<String, VariableError> {
        Ok(v.trim().to_ascii_lowercase())
    }
    fn show(&self, value: &String) -> String {
        value.clone()
    }
    fn takes(&self) -> String {
        "comma-separated names".into()
    }
}

/// Text of a given shape, kept as given once `check` accepts it.
pub(crate) struct Shaped {
    /// Accepts or refuses `v` for `{prefix}-{name}` with an error naming it.
    pub check: fn(prefix: &str, name: &str, v: &str) -> Result<(), VariableError>,
    /// What it takes, for the reference table.
    pub takes: &'static str,
}

impl Codec<String> for Shaped {
    fn parse(&self, prefix: &str, name: &str, v: &str) -> Result<String, VariableError> {
        (self.check)(prefix, name, v)?;
        Ok(v.to_string())
    }
    fn show(&self, value: &String) -> String {
        value.clone()
    }
    fn takes(&self) -> String {
        self.takes.into()
    }
}

/// A listener list: `;`-separated `host:port`, or empty for no listener of that kind.
pub(crate) const HOST_PORT_LIST: Shaped = Shaped {
    check: super::values::check_host_ports,
    takes: "a ';'-separated host:port list (empty: no listener)",
};

/// One host name or address (no list), kept trimmed.
pub(crate) struct OneHost;

impl Codec<String> for OneHost {
    fn parse(&self, prefix: &str, name: &str, v: &str) -> Result<String, VariableError> {
        if v.trim().is_empty() || v.contains(';') {
            return Err(VariableError::malformed(
                prefix,
                name,
                v,
                "one host name or address",
            ));
        }
        Ok(v.trim().to_string())
    }
    fn show(&self, value: &String) -> String {
        value.clone()
    }
    fn takes(&self) -> String {
        "one host name or address".into()
    }
}

/// A variable whose values are words, one per variant.
pub(crate) trait Words: Sized + Copy + 'static {
    /// Every variant with its word (the first is listed; matching ignores case and blanks).
    const WORDS: &'static [(&'static str, Self)];
    /// What it takes, for errors and the reference table.
    const EXPECTED: &'static str;

    /// The variant whose word is `v` (any case, blanks around ignored).
    fn from_word(v: &str) -> Option<Self> {
        let v = v.trim();
        Self::WORDS
            .iter()
            .find(|(w, _)| w.eq_ignore_ascii_case(v))
            .map(|(_, t)| *t)
    }

    /// The variant's word.
    fn word(self) -> &'static str
    where
        Self: PartialEq,
    {
        Self::WORDS
            .iter()
            .find(|(_, t)| *t == self)
            .map_or("", |(w, _)| w)
    }
}

/// One of a [`Words`] type's words.
pub(crate) struct OneOf;

impl<T: Words + PartialEq> Codec<T> for OneOf {
    fn parse(&self, prefix: &str, name: &str, v: &str) -> Result<T, VariableError> {
        T::from_word(v).ok_or_else(|| VariableError::malformed(prefix, name, v, T::EXPECTED))
    }
    fn show(&self, value: &T) -> String {
        value.word().to_string()
    }
    fn takes(&self) -> String {
        T::EXPECTED.into()
    }
}

/// Declares a group of variables; see the module documentation. Each variable is
/// `field: Type = default => "name" | "old_name", Codec, flag;` (old names and flags optional),
/// with its documentation above it. `for prefix` names the `&str` the defaults may depend on.
/// `groups { field: Type = default; }` nests other declared groups (their variables are set and
/// listed through this one); `other { field: Type = default; }` holds fields that are no
/// variable of their own.
macro_rules! variables {
    (
        $(#[$meta:meta])*
        pub struct $group:ident for $prefix:ident {
            $(
                $(#[doc = $doc:literal])*
                $field:ident: $ty:ty = $default:expr
                    => $name:literal $(| $alias:literal)*, $codec:expr $(, $flag:ident)*;
            )*
        }
        $(groups {
            $( $(#[doc = $gdoc:literal])* $gfield:ident: $gty:ty = $gdefault:expr; )*
        })?
        $(other {
            $( $(#[doc = $odoc:literal])* $ofield:ident: $oty:ty = $odefault:expr; )*
        })?
    ) => {
        $(#[$meta])*
        pub struct $group {
            $( $(#[doc = $doc])* pub $field: $ty, )*
            $($( $(#[doc = $gdoc])* pub $gfield: $gty, )*)?
            $($( $(#[doc = $odoc])* pub $ofield: $oty, )*)?
        }

        #[allow(dead_code)]
        impl $group {
            /// Every variable at its default under `prefix` (`mysql`, `pgsql`, `admin`, `mcp`).
            pub(crate) fn defaults_for($prefix: &str) -> Self {
                $group {
                    $( $field: $default, )*
                    $($( $gfield: $gdefault, )*)?
                    $($( $ofield: $odefault, )*)?
                }
            }

            /// Sets `name` if it is one of these (or of a nested group's); `None` when not.
            pub(crate) fn set_variable(
                &mut self,
                prefix: &str,
                name: &str,
                v: &str,
            ) -> Option<Result<(), VariableError>> {
                use $crate::declared::Codec;
                match name {
                    $( $name $(| $alias)* => Some(
                        Codec::<$ty>::parse(&$codec, prefix, name, v).map(|x| self.$field = x)
                    ), )*
                    _ => {
                        $($( if let Some(r) = self.$gfield.set_variable(prefix, name, v) {
                            return Some(r);
                        } )*)?
                        None
                    }
                }
            }

            /// Every variable listed under `prefix` as (name without prefix, value).
            pub(crate) fn variable_pairs(&self, prefix: &str) -> Vec<(String, String)> {
                use $crate::declared::{Codec, listed};
                let mut out: Vec<(String, String)> = Vec::new();
                $( if listed(0 $(| $crate::declared::flag::$flag)*, prefix) {
                    out.push(($name.to_string(), Codec::<$ty>::show(&$codec, &self.$field)));
                } )*
                $($( out.extend(self.$gfield.variable_pairs(prefix)); )*)?
                out
            }

            /// The reference table's rows for the variables listed under `prefix`.
            pub(crate) fn describe_variables(
                prefix: &str,
                out: &mut Vec<$crate::declared::VariableRow>,
            ) {
                use $crate::declared::{Codec, VariableRow, listed};
                let defaults = Self::defaults_for(prefix);
                $( let flags = 0 $(| $crate::declared::flag::$flag)*;
                if listed(flags, prefix) {
                    out.push(VariableRow::new(
                        prefix,
                        $name,
                        Codec::<$ty>::show(&$codec, &defaults.$field),
                        Codec::<$ty>::takes(&$codec),
                        flags,
                        &[$($doc),*],
                    ));
                } )*
                $($( <$gty>::describe_variables(prefix, out); )*)?
            }

            /// Whether `name` (under any prefix) takes effect after a restart only.
            pub(crate) fn needs_restart(name: &str) -> bool {
                match name {
                    $( $name $(| $alias)* => {
                        let flags = 0 $(| $crate::declared::flag::$flag)*;
                        flags & $crate::declared::flag::restart != 0
                    } )*
                    _ => false $($( || <$gty>::needs_restart(name) )*)?,
                }
            }
        }
    };
}
pub(crate) use variables;
