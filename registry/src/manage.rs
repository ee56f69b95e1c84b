//! Yanking and unyanking versions, and a plugin's owners: invited by an
//! owner, they become owners when they accept, and can be removed, never the
//! last.

use crate::error::{Error, Result};
use crate::meta::{self, Conn, params};
use crate::{Account, OwnerList, Registry, Role, names};

/// The most accounts one owners request may name.
const MAX_OWNERS_PER_REQUEST: usize = 100;

impl Registry {
    /// Marks `id` `version` yanked (`true`) or not: it stays downloadable,
    /// but search and default installs skip it. Owners and admins only.
    pub async fn set_yanked(
        &self,
        account: &Account,
        id: &str,
        version: &str,
        yanked: bool,
    ) -> Result<()> {
        names::plugin_id(id)?;
        names::version(version)?;
        let (id, version, account) = (id.to_string(), version.to_string(), account.clone());
        self.write(move |conn| {
            may_manage(conn, &account, &id)?;
            let changed = conn.execute(
                "UPDATE versions SET yanked = ?3 WHERE plugin = ?1 AND version = ?2",
                params![&id, &version, yanked],
            )?;
            if changed == 0 {
                return Err(Error::NotFound(format!("{id} has no version {version}")));
            }
            update_latest(conn, &id)?;
            tracing::info!(%id, %version, yanked, account = %account.name, "yank changed");
            Ok(())
        })
        .await
    }

    /// The accounts that own `id`, and those invited to.
    pub async fn owners(&self, id: &str) -> Result<OwnerList> {
        names::plugin_id(id)?;
        let id = id.to_string();
        self.read(move |conn| {
            plugin_exists(conn, &id)?;
            owner_list(conn, &id)
        })
        .await
    }

    /// Invites `users` (account names) to own `id`: its owners and admins
    /// may. An invited account owns nothing until it accepts
    /// ([`Registry::accept_ownership`]), so nobody is made to answer for a
    /// plugin without agreeing to. Accounts that already own it are left
    /// as they are. Returns the owners and invitations after.
    pub async fn invite_owners(
        &self,
        account: &Account,
        id: &str,
        users: Vec<String>,
    ) -> Result<OwnerList> {
        names::plugin_id(id)?;
        if users.len() > MAX_OWNERS_PER_REQUEST {
            return Err(Error::bad_request(
                "too-many-users",
                format!("at most {MAX_OWNERS_PER_REQUEST} users per request"),
            ));
        }
        for user in &users {
            names::account(user)?;
        }
        let (id, account) = (id.to_string(), account.clone());
        self.write(move |conn| {
            may_manage(conn, &account, &id)?;
            for user in &users {
                let invited = account_id(conn, user)?;
                if is_owner(conn, &id, invited)? {
                    continue;
                }
                conn.execute(
                    "INSERT INTO owner_invitations (plugin, account, invited_by, created_at)
                     VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                    params![&id, invited, account.id, meta::now()],
                )?;
            }
            let owners = owner_list(conn, &id)?;
            tracing::info!(%id, ?users, account = %account.name, "owners invited");
            Ok(owners)
        })
        .await
    }

    /// `account` accepts its invitation to own `id` and becomes an owner;
    /// 404 if it has none, or if the account that sent it is no longer an
    /// owner of `id` (nor an admin): a removed owner's invitations are void
    /// (the invitation is then dropped). Returns the owners and invitations
    /// after.
    pub async fn accept_ownership(&self, account: &Account, id: &str) -> Result<OwnerList> {
        names::plugin_id(id)?;
        let (id, account) = (id.to_string(), account.clone());
        // The outcome is inside the transaction's result: a void invitation
        // is dropped (committed) and refused.
        self.write(move |conn| {
            plugin_exists(conn, &id)?;
            // The invitation, and whether whoever sent it may still manage
            // the plugin: one sent by an owner since removed is void.
            let invitation = conn
                .query_opt(
                    "SELECT a.name, a.role = 'admin' OR EXISTS (
                         SELECT 1 FROM owners o WHERE o.plugin = i.plugin AND o.account = i.invited_by)
                     FROM owner_invitations i JOIN accounts a ON a.id = i.invited_by
                     WHERE i.plugin = ?1 AND i.account = ?2",
                    params![&id, account.id],
                )?
                .map(|row| Ok::<_, Error>((row.text(0)?, row.bool(1)?)))
                .transpose()?;
            let Some((inviter, valid)) = invitation else {
                return Err(Error::NotFound(format!(
                    "account {} has no invitation to own plugin {id}",
                    account.name
                )));
            };
            conn.execute(
                "DELETE FROM owner_invitations WHERE plugin = ?1 AND account = ?2",
                params![&id, account.id],
            )?;
            if !valid {
                // Dropped for good: it can never become valid again.
                return Ok(Err(Error::NotFound(format!(
                    "account {}'s invitation to own plugin {id} was sent by {inviter}, who no \
                     longer owns it: ask a current owner to invite you again",
                    account.name
                ))));
            }
            conn.execute(
                "INSERT INTO owners (plugin, account) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                params![&id, account.id],
            )?;
            let owners = owner_list(conn, &id)?;
            tracing::info!(%id, account = %account.name, "ownership accepted");
            Ok(Ok(owners))
        })
        .await?
    }

    /// Removes `user` from the owners of `id`, or withdraws its invitation:
    /// its owners and admins may (an owner may remove itself). A removed
    /// owner's invitations to `id` are withdrawn with it. The last
    /// owner cannot be removed ([`Error::LastOwner`]): a plugin always has
    /// someone to answer for it. Returns the owners and invitations after.
    pub async fn remove_owner(&self, account: &Account, id: &str, user: &str) -> Result<OwnerList> {
        names::plugin_id(id)?;
        names::account(user)?;
        let (id, user, account) = (id.to_string(), user.to_string(), account.clone());
        self.write(move |conn| {
            may_manage(conn, &account, &id)?;
            let removed = account_id(conn, &user)?;
            let withdrawn = conn.execute(
                "DELETE FROM owner_invitations WHERE plugin = ?1 AND account = ?2",
                params![&id, removed],
            )?;
            if is_owner(conn, &id, removed)? {
                let owners = conn
                    .query_one(
                        "SELECT count(*) FROM owners WHERE plugin = ?1",
                        params![&id],
                    )?
                    .int(0)?;
                if owners <= 1 {
                    return Err(Error::LastOwner(format!(
                        "{user} is the last owner of plugin {id}: invite another owner, and \
                         let them accept, before removing it"
                    )));
                }
                conn.execute(
                    "DELETE FROM owners WHERE plugin = ?1 AND account = ?2",
                    params![&id, removed],
                )?;
                // Its invitations go with it: a removed owner can no longer
                // bring in owners, through invitations sent before.
                conn.execute(
                    "DELETE FROM owner_invitations WHERE plugin = ?1 AND invited_by = ?2",
                    params![&id, removed],
                )?;
            } else if withdrawn == 0 {
                return Err(Error::NotFound(format!(
                    "account {user} neither owns plugin {id} nor is invited to"
                )));
            }
            let owners = owner_list(conn, &id)?;
            tracing::info!(%id, %user, account = %account.name, "owner removed");
            Ok(owners)
        })
        .await
    }
}

/// The id of the account `name`; 404 if there is none.
fn account_id(conn: &mut dyn Conn, name: &str) -> Result<i64> {
    conn.query_opt("SELECT id FROM accounts WHERE name = ?1", params![name])?
        .ok_or_else(|| Error::NotFound(format!("there is no account {name}")))?
        .int(0)
}

/// Whether the account `account` owns `id`.
fn is_owner(conn: &mut dyn Conn, id: &str, account: i64) -> Result<bool> {
    Ok(conn
        .query_opt(
            "SELECT 1 FROM owners WHERE plugin = ?1 AND account = ?2",
            params![id, account],
        )?
        .is_some())
}

/// The owners and invitations of `id`.
fn owner_list(conn: &mut dyn Conn, id: &str) -> Result<OwnerList> {
    Ok(OwnerList {
        users: owners_of(conn, id)?,
        invited: account_names(conn, "owner_invitations", id)?,
    })
}

/// 404 unless the plugin `id` exists.
pub(crate) fn plugin_exists(conn: &mut dyn Conn, id: &str) -> Result<()> {
    conn.query_opt("SELECT 1 FROM plugins WHERE id = ?1", params![id])?
        .map(|_| ())
        .ok_or_else(|| Error::NotFound(format!("there is no plugin {id}")))
}

/// The owners' account names, sorted.
pub(crate) fn owners_of(conn: &mut dyn Conn, id: &str) -> Result<Vec<String>> {
    account_names(conn, "owners", id)
}

/// The names of the accounts `table` (`owners` or `owner_invitations`)
/// lists for the plugin `id`, sorted by their bytes.
fn account_names(conn: &mut dyn Conn, table: &'static str, id: &str) -> Result<Vec<String>> {
    let by_name = conn.dialect().bytewise("a.name");
    conn.query(
        &format!(
            "SELECT a.name FROM {table} t JOIN accounts a ON a.id = t.account
             WHERE t.plugin = ?1 ORDER BY {by_name}"
        ),
        params![id],
    )?
    .iter()
    .map(|row| row.text(0))
    .collect()
}

/// 404 unless `id` exists, 403 unless `account` owns it or is an admin.
fn may_manage(conn: &mut dyn Conn, account: &Account, id: &str) -> Result<()> {
    plugin_exists(conn, id)?;
    if account.role == Role::Admin || is_owner(conn, id, account.id)? {
        return Ok(());
    }
    Err(Error::NotAnOwner(format!(
        "account {} is not an owner of plugin {id}",
        account.name
    )))
}

/// Sets `plugins.latest` of `id` to its highest version not yanked.
pub(crate) fn update_latest(conn: &mut dyn Conn, id: &str) -> Result<()> {
    let latest = conn
        .query(
            "SELECT version FROM versions WHERE plugin = ?1 AND NOT yanked",
            params![id],
        )?
        .iter()
        .filter_map(|row| row.text(0).ok())
        .filter_map(|v| semver::Version::parse(&v).ok())
        .max();
    conn.execute(
        "UPDATE plugins SET latest = ?2 WHERE id = ?1",
        params![id, latest.map(|v| v.to_string())],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::{Backend, TestData, on_both_backends};

    on_both_backends!(
        an_invitation_from_a_former_owner_is_void,
        super::an_invitation_from_a_former_owner_is_void
    );
    /// An invitation whose sender no longer owns the plugin (left over from
    /// before removals withdrew them) is refused and dropped; one from an
    /// admin, who owns nothing, holds.
    async fn an_invitation_from_a_former_owner_is_void(backend: Backend) {
        let data = TestData::new("invitations", backend);
        let registry = data.open(None);
        let mut accounts = Vec::new();
        for (name, role) in [
            ("alice", Role::Publisher),
            ("bob", Role::Publisher),
            ("carol", Role::Publisher),
            ("root", Role::Admin),
        ] {
            let token = registry.create_token(name, role).unwrap();
            accounts.push(registry.authenticate(&token).await.unwrap());
        }
        let [alice, bob, carol, root] = <[Account; 4]>::try_from(accounts).unwrap();
        let ids = (alice.id, bob.id, carol.id, root.id);
        registry
            .write(move |conn| {
                conn.execute(
                    "INSERT INTO plugins (id, latest, created_at) VALUES ('calc', NULL, 0)",
                    &[],
                )?;
                conn.execute(
                    "INSERT INTO owners (plugin, account) VALUES ('calc', ?1)",
                    params![ids.0],
                )?;
                for (account, invited_by) in [(ids.2, ids.1), (ids.3, ids.3)] {
                    conn.execute(
                        "INSERT INTO owner_invitations (plugin, account, invited_by, created_at)
                         VALUES ('calc', ?1, ?2, 0)",
                        params![account, invited_by],
                    )?;
                }
                Ok(())
            })
            .await
            .unwrap();
        let refused = registry.accept_ownership(&carol, "calc").await.unwrap_err();
        assert!(
            matches!(&refused, Error::NotFound(m) if m.contains("sent by bob")),
            "{refused:?}"
        );
        let owners = registry.owners("calc").await.unwrap();
        assert_eq!(owners.users, ["alice"]);
        assert_eq!(owners.invited, ["root"]);
        let owners = registry.accept_ownership(&root, "calc").await.unwrap();
        assert_eq!(owners.users, ["alice", "root"]);
        // The void invitation was dropped, not left to refuse again.
        let gone = registry.accept_ownership(&carol, "calc").await.unwrap_err();
        assert!(
            matches!(&gone, Error::NotFound(m) if m.contains("has no invitation")),
            "{gone:?}"
        );
    }
}
