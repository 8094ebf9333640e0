//! The channels a replica talks on (spec §2.6 message sources), as one type: [`Channel`], with
//! one place per fact — its name on the wire and in the store, the history sources it writes,
//! whether its users are linked by its own ids, the shape of its channel data, and its bot
//! ([`Bot`]; stored as every bot is, by `service::integrations`; run by its module,
//! `channels::<name>`). Adding a channel is a variant here with its arms, and for a bot its
//! module and its row in `channels::module`; the tests below hold the lists that stay literal to
//! this type.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

/// A channel. Its serde name is its wire name ([`Channel::name`]), stored as is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Channel {
    #[serde(rename = "messengerB")]
    MessengerB,
    #[serde(rename = "messengerA")]
    MessengerA,
    /// The embed widget.
    #[serde(rename = "embed")]
    Embed,
    /// The replica's web page (and API callers that name no channel).
    #[serde(rename = "web")]
    Web,
}

impl Channel {
    /// Every channel, in the order the source lists name them.
    pub const ALL: [Channel; 4] = [Channel::MessengerB, Channel::MessengerA, Channel::Embed, Channel::Web];

    /// The name on the wire and in the store (`source`, linked-account types, routes).
    pub const fn name(self) -> &'static str {
        match self {
            Channel::MessengerB => "messengerB",
            Channel::MessengerA => "messengerA",
            Channel::Embed => "embed",
            Channel::Web => "web",
        }
    }

    /// The channel named `name` on the wire.
    pub fn parse(name: &str) -> Option<Channel> {
        Channel::ALL.into_iter().find(|c| c.name() == name)
    }

    /// History sources the channel writes besides its own name (messengerA's autopilot).
    pub const fn extra_sources(self) -> &'static [&'static str] {
        match self {
            Channel::MessengerA => &["messengerA_autopilot"],
            Channel::MessengerB | Channel::Embed | Channel::Web => &[],
        }
    }

    /// Whether the channel's users are linked accounts keyed by its own ids
    /// (`X-USER-ID-TYPE`, `linkedAccounts[].accountType`; made on first contact).
    pub const fn links_users(self) -> bool {
        match self {
            Channel::MessengerA | Channel::MessengerB | Channel::Embed => true,
            Channel::Web => false,
        }
    }

    /// The bot the server runs for the channel, if any.
    pub const fn bot(self) -> Option<Bot> {
        match self {
            Channel::MessengerA => Some(Bot::MessengerA),
            Channel::MessengerB => Some(Bot::MessengerB),
            Channel::Embed | Channel::Web => None,
        }
    }

    /// The field of the channel data in bodies and history items (`messengerA_data`), for a
    /// channel that has channel data (its shape: `service::channel_data`).
    pub const fn data_field(self) -> Option<&'static str> {
        match self {
            Channel::MessengerA => Some("messengerA_data"),
            Channel::MessengerB => Some("messengerB_data"),
            Channel::Embed | Channel::Web => None,
        }
    }

    /// The field of the channel data naming the sender (messengerA `username`, messengerB
    /// `author_name`).
    pub const fn sender_field(self) -> Option<&'static str> {
        match self {
            Channel::MessengerA => Some("username"),
            Channel::MessengerB => Some("author_name"),
            Channel::Embed | Channel::Web => None,
        }
    }

    /// The group a user item with channel data `data` belongs to, as `(place, name)`: a
    /// messengerA group, supergroup or channel (per `chat_id`), a messengerB channel on a
    /// server (per `channel_id`); `None` for a one-user chat. Read leniently: the data of
    /// items stored long ago is taken as it was stored.
    pub fn group(self, data: &Value) -> Option<(String, Option<String>)> {
        let name = |field: &str| data[field].as_str().map(str::to_string);
        match self {
            Channel::MessengerA if data["chat_type"].as_str().is_some_and(|t| t != "private") => {
                Some((data["chat_id"].to_string(), name("chat_name")))
            }
            Channel::MessengerB if data.get("server_id").is_some_and(|s| s.is_string()) => {
                Some((data["channel_id"].as_str().unwrap_or_default().to_string(), name("channel_name")))
            }
            _ => None,
        }
    }
}

/// Every history source (spec §2.6), each channel's name then the extra ones, in
/// [`Channel::ALL`]'s order: `messengerB, messengerA, embed, web, messengerA_autopilot`.
pub fn sources() -> Vec<&'static str> {
    let names = Channel::ALL.into_iter().map(Channel::name);
    names.chain(Channel::ALL.into_iter().flat_map(|c| c.extra_sources().iter().copied())).collect()
}

/// Checks a `source` value (one of [`sources`]).
pub fn check_source(source: &str) -> Result<()> {
    let all = sources();
    if all.contains(&source) {
        Ok(())
    } else {
        Err(Error::invalid("source", format!("must be one of {}", all.join(", "))))
    }
}

/// The channels whose users are linked accounts (see [`Channel::links_users`]), in
/// [`Channel::ALL`]'s order.
pub fn linked_account_types() -> Vec<&'static str> {
    Channel::ALL.into_iter().filter(|c| c.links_users()).map(Channel::name).collect()
}

/// A channel the server runs a bot for: its bots stored in the one table of every bot
/// (`service::integrations`), run by its module (`channels::module`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Bot {
    MessengerA,
    MessengerB,
}

impl Bot {
    /// Every bot.
    pub const ALL: [Bot; 2] = [Bot::MessengerA, Bot::MessengerB];

    /// Its channel.
    pub const fn channel(self) -> Channel {
        match self {
            Bot::MessengerA => Channel::MessengerA,
            Bot::MessengerB => Channel::MessengerB,
        }
    }

    /// Its channel's name (sealing context, messages, `…/integrations/{name}`).
    pub const fn name(self) -> &'static str {
        self.channel().name()
    }

    /// The bot named `name` on the wire (the `integration` filter of replica lists).
    pub fn parse(name: &str) -> Option<Bot> {
        Channel::parse(name).and_then(Channel::bot)
    }

    /// The field of its integration object in replica reads (`<name>_integration`).
    pub const fn integration_field(self) -> &'static str {
        match self {
            Bot::MessengerA => "messengerA_integration",
            Bot::MessengerB => "messengerB_integration",
        }
    }
}

/// What the request path asks of the bots this server runs, after a bot was connected,
/// disconnected or its replica deleted. `crate::channels` runs the bots and implements it; the
/// server's state holds it as `Arc<dyn Bots>`, so the request path never names the runners.
pub trait Bots: Send + Sync {
    /// (Re)starts the runner of `bot` for `replica` (a runner already there is stopped first).
    fn start(&self, bot: Bot, replica: uuid::Uuid);
    /// Stops the runner of `bot` for `replica`, if one runs.
    fn stop(&self, replica: uuid::Uuid, bot: Bot);
    /// Stops every runner of `replica` (it is being deleted).
    fn stop_all(&self, replica: uuid::Uuid) {
        for bot in Bot::ALL {
            self.stop(replica, bot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for c in Channel::ALL {
            assert_eq!(Channel::parse(c.name()), Some(c));
            assert_eq!(serde_json::to_value(c).unwrap(), Value::from(c.name()));
            assert_eq!(c.bot().map(Bot::channel), c.bot().map(|_| c));
            if let Some(field) = c.data_field() {
                assert_eq!(field, format!("{}_data", c.name()));
            }
        }
        for b in Bot::ALL {
            assert_eq!(b.channel().bot(), Some(b), "{b:?} is its channel's bot");
            assert_eq!(Bot::parse(b.name()), Some(b));
            assert_eq!(b.integration_field(), format!("{}_integration", b.name()));
        }
        assert_eq!(Channel::ALL.into_iter().filter(|c| c.bot().is_some()).count(), Bot::ALL.len());
    }

    #[test]
    fn the_stored_names_do_not_change() {
        assert_eq!(sources(), ["messengerB", "messengerA", "embed", "web", "messengerA_autopilot"]);
        assert_eq!(linked_account_types(), ["messengerB", "messengerA", "embed"]);
        assert!(check_source("messengerA_autopilot").is_ok());
        assert!(check_source("fax").is_err());
    }
}
