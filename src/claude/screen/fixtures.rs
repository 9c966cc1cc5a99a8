//! Claude Code screens captured or assembled for the tests, from `tests/fixtures/screens/`
//! (its README says which is which).

pub const CONNECT_FAILED_A: &str =
    include_str!("../../../tests/fixtures/screens/connect_failed_a.txt");
pub const THEME_B1: &str = include_str!("../../../tests/fixtures/screens/theme_b1.txt");
pub const SECURITY_B2: &str = include_str!("../../../tests/fixtures/screens/security_b2.txt");
pub const TRUST_CURRENT_NO: &str =
    include_str!("../../../tests/fixtures/screens/trust_current_no.txt");
pub const TRUST_CURRENT_YES: &str =
    include_str!("../../../tests/fixtures/screens/trust_current_yes.txt");
pub const READY_B4: &str = include_str!("../../../tests/fixtures/screens/ready_b4.txt");
pub const TYPED_B5: &str = include_str!("../../../tests/fixtures/screens/typed_b5.txt");
pub const BUSY_B5: &str = include_str!("../../../tests/fixtures/screens/busy_b5.txt");
pub const DECLINED_D1: &str = include_str!("../../../tests/fixtures/screens/declined_d1.txt");
pub const TRUST_NUMBERED_TRUST: &str =
    include_str!("../../../tests/fixtures/screens/trust_numbered_trust.txt");
pub const TRUST_NUMBERED_PROCEED: &str =
    include_str!("../../../tests/fixtures/screens/trust_numbered_proceed.txt");
pub const API_KEY: &str = include_str!("../../../tests/fixtures/screens/api_key.txt");
pub const LOGIN: &str = include_str!("../../../tests/fixtures/screens/login.txt");
pub const HELD_PEER_MESSAGE: &str =
    include_str!("../../../tests/fixtures/screens/held_peer_message.txt");

/// B4 with the no-break space after the marker that the real screen has.
pub fn ready_with_nbsp() -> String {
    READY_B4.replace("\n❯\n", "\n❯\u{a0}\n")
}
