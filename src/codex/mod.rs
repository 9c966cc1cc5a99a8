//! Everything wakebridge knows about OpenAI's Codex CLI as it really is (0.171.0, tried offline
//! against a stand-in of its model API): its home, its hooks file and how Codex decides to trust
//! a hook, its control socket, its rollout, its first screens. Nothing here decides what to do.

pub mod control;
pub mod home;
pub mod hooks;
pub mod host;
pub mod rollout;
pub mod screen;
